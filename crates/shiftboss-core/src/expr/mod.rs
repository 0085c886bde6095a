//! Expressions in definitions (`${task.input.order_id}`): being written; see the issue-4 trail.
