//! The demo's order workflow: reserve stock, then charge the payment, then ship. When an order
//! cannot go on (a refusal), what was done is undone: the payment refunded, the stock released.

use shiftboss_core::workflow::WorkflowDef;

/// Steps name paths only: each agent wraps one service and knows its address, so a restarted
/// demo whose services came up on other ports still runs the tasks it had started.
pub const ORDER_WORKFLOW: &str = r#"{
  "name": "order",
  "version": 2,
  "description": "reserve stock, charge, ship; refund and release when an order cannot go on",
  "retry": {"kind": "intervals", "intervals": ["100ms", "250ms", "500ms", "1s", "2s", "4s"]},
  "steps": [
    {"name": "reserve-stock", "agent": "stock", "config": {"url": "/reserve"}, "timeout": "1s",
     "compensate": {"name": "release-stock", "agent": "stock", "config": {"url": "/release"}, "timeout": "1s"}},
    {"name": "charge-payment", "agent": "payment", "config": {"url": "/charge"}, "timeout": "1s",
     "compensate": {"name": "refund-payment", "agent": "payment", "config": {"url": "/refund"}, "timeout": "1s",
                    "input": {"order_id": "${task.input.order_id}", "amount_cents": "${task.input.amount_cents}"}}},
    {"name": "ship", "agent": "shipping", "config": {"url": "/ship"}, "timeout": "1s"}
  ]
}"#;

pub fn order_workflow() -> WorkflowDef {
    WorkflowDef::from_json(ORDER_WORKFLOW).expect("the built-in order workflow is valid")
}

/// The input of order number `n`: deterministic, so that a rerun submits the same orders.
pub fn order_input(n: u32) -> (String, serde_json::Value) {
    let key = format!("order-{n:06}");
    let input = serde_json::json!({
        "order_id": key,
        "sku": format!("SKU-{}", n % 97),
        "quantity": 1 + n % 3,
        "amount_cents": 1000 + (n * 37) % 9000,
    });
    (key, input)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_workflow_is_valid_and_orders_are_stable() {
        let wf = super::order_workflow();
        assert_eq!(wf.steps.len(), 3);
        assert_eq!(wf.all_steps().len(), 5, "two compensations");
        assert_eq!(super::order_input(7), super::order_input(7));
        assert_ne!(super::order_input(7).0, super::order_input(8).0);
    }
}
