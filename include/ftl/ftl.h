// Everything in one include.
#pragma once

#include "ftl/atomic_counter.h"
#include "ftl/callbacks.h"
#include "ftl/fibtex.h"
#include "ftl/ftl_valgrind.h"
#include "ftl/parallel_for.h"
#include "ftl/task.h"
#include "ftl/task_counter.h"
#include "ftl/task_scheduler.h"
#include "ftl/thread_local.h"
