// The name of an EmptyQueueBehavior, for test and stress-run messages.
#pragma once

#include "ftl/task_scheduler.h"

namespace ftl_test {

inline char const *BehaviorName(ftl::EmptyQueueBehavior behavior) {
    switch (behavior) {
    case ftl::EmptyQueueBehavior::Spin:
        return "Spin";
    case ftl::EmptyQueueBehavior::Yield:
        return "Yield";
    case ftl::EmptyQueueBehavior::Sleep:
        return "Sleep";
    }
    return "?";
}

} // namespace ftl_test
