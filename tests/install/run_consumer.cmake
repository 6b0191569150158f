# cmake -DBUILD_DIR=<ftl build tree> -DCONSUMER_SOURCE_DIR=<consumer> -DWORK_DIR=<scratch>
#       [-DCONFIG=<build type>] [-DGENERATOR=<generator>] [-DCXX_COMPILER=<compiler>]
#       [-DSHARED_FROM=<ftl source tree>]
#       -P run_consumer.cmake
#
# 1. cmake --install BUILD_DIR --prefix WORK_DIR/prefix; with SHARED_FROM,
#    first configure and build the library alone from that source tree with
#    BUILD_SHARED_LIBS=ON into BUILD_DIR, and install that
# 2. configure CONSUMER_SOURCE_DIR against that prefix only, and build it
#    (with SHARED_FROM: requiring libftl.so, and with the dlopen plugin)
# 3. run the consumer, which checks its own result (and the plugin's host)
cmake_minimum_required(VERSION 3.16)

foreach(variable IN ITEMS BUILD_DIR CONSUMER_SOURCE_DIR WORK_DIR)
    if(NOT DEFINED ${variable} OR "${${variable}}" STREQUAL "")
        message(FATAL_ERROR "run_consumer.cmake: -D${variable}=... is required")
    endif()
endforeach()

set(prefix "${WORK_DIR}/prefix")
set(consumer_build "${WORK_DIR}/build")

function(run_step description)
    message(STATUS "install_consumer: ${description}")
    execute_process(COMMAND ${ARGN} RESULT_VARIABLE result)
    if(NOT result EQUAL 0)
        message(FATAL_ERROR "install_consumer: ${description} failed (${result})")
    endif()
endfunction()

# Start from nothing, so that a stale prefix or consumer build can't pass for
# a working one.
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

set(config_args)
if(CONFIG)
    set(config_args --config "${CONFIG}")
endif()
# The generator, compiler and build type of a configure step.
set(toolchain_args)
if(GENERATOR)
    list(APPEND toolchain_args -G "${GENERATOR}")
endif()
if(CXX_COMPILER)
    list(APPEND toolchain_args "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
endif()
if(CONFIG)
    list(APPEND toolchain_args "-DCMAKE_BUILD_TYPE=${CONFIG}")
endif()
if(SHARED_FROM)
    # Without TLS descriptors, a libftl.so that dlopen loads keeps its
    # thread-local state in dynamic TLS (with them, glibc may find it room in
    # static TLS): the plugin then runs the path of a lock that calls in for
    # its thread's state, and the program that links libftl.so the inlined
    # one.
    set(library_args -S "${SHARED_FROM}" -B "${BUILD_DIR}" -DBUILD_SHARED_LIBS=ON -DFTL_BUILD_TESTS=OFF
        -DFTL_BUILD_EXAMPLES=OFF -DFTL_BUILD_BENCHMARKS=OFF -DFTL_HAVE_TLS_DIALECT_GNU2=OFF ${toolchain_args})
    run_step("configure a shared library" "${CMAKE_COMMAND}" ${library_args})
    run_step("build libftl.so" "${CMAKE_COMMAND}" --build "${BUILD_DIR}" --parallel 2 ${config_args})
endif()
run_step("install into ${prefix}" "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}" ${config_args})

foreach(expected IN ITEMS include/ftl/ftl.h include/ftl/task_scheduler.h include/ftl/detail/wait_list.h)
    if(NOT EXISTS "${prefix}/${expected}")
        message(FATAL_ERROR "install_consumer: ${expected} was not installed")
    endif()
endforeach()
file(GLOB_RECURSE package_configs "${prefix}/*/ftlConfig.cmake")
if(NOT package_configs)
    message(FATAL_ERROR "install_consumer: no ftlConfig.cmake under ${prefix}")
endif()

set(configure_args
    -S "${CONSUMER_SOURCE_DIR}" -B "${consumer_build}"
    "-DCMAKE_PREFIX_PATH=${prefix}"
    # Only the scratch prefix may provide ftl: no package registries.
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
    -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF
    ${toolchain_args})
if(SHARED_FROM)
    list(APPEND configure_args -DFTL_EXPECT_SHARED=ON)
    file(GLOB shared_libraries "${prefix}/*/libftl.so*")
    if(NOT shared_libraries)
        message(FATAL_ERROR "install_consumer: no libftl.so was installed under ${prefix}")
    endif()
endif()
run_step("configure the consumer" "${CMAKE_COMMAND}" ${configure_args})

# The package must have come from the prefix, not from the build tree or the
# system.
file(STRINGS "${consumer_build}/CMakeCache.txt" ftl_dir_line REGEX "^ftl_DIR:")
string(REGEX REPLACE "^ftl_DIR:[A-Z]*=" "" ftl_dir "${ftl_dir_line}")
get_filename_component(real_prefix "${prefix}" REALPATH)
get_filename_component(ftl_dir "${ftl_dir}" REALPATH)
string(FIND "${ftl_dir}" "${real_prefix}/" position)
if(NOT position EQUAL 0)
    message(FATAL_ERROR "install_consumer: ftl was found at '${ftl_dir}', not under ${prefix}")
endif()

run_step("build the consumer" "${CMAKE_COMMAND}" --build "${consumer_build}" ${config_args})

# Single-configuration generators put the program in the build folder,
# multi-configuration ones in a folder per configuration.
set(consumer_app "${consumer_build}/app")
if(NOT EXISTS "${consumer_app}" AND CONFIG)
    set(consumer_app "${consumer_build}/${CONFIG}/app")
endif()
if(NOT EXISTS "${consumer_app}")
    message(FATAL_ERROR "install_consumer: the consumer program was not built")
endif()
run_step("run the consumer" "${consumer_app}")
if(SHARED_FROM)
    get_filename_component(consumer_dir "${consumer_app}" DIRECTORY)
    if(NOT EXISTS "${consumer_dir}/plugin_host")
        message(FATAL_ERROR "install_consumer: the plugin's host was not built")
    endif()
    run_step("load the plugin with dlopen and run it" "${consumer_dir}/plugin_host")
endif()
