// Everything in one include.
#pragma once

#include "ftl/atomic_counter.h"
#include "ftl/callbacks.h"
#include "ftl/condition_variable.h"
#include "ftl/fibtex.h"
#include "ftl/ftl_valgrind.h"
#include "ftl/parallel_for.h"
#include "ftl/stats.h"
#include "ftl/task.h"
#include "ftl/task_counter.h"
#include "ftl/task_graph.h"
#include "ftl/task_scheduler.h"
#include "ftl/thread_local.h"
#include "ftl/wait_group.h"
