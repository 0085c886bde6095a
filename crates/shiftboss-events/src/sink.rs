//! A sink, `<kind>:<where>`: parsed once, so that a bad one is refused when the workflow is
//! registered rather than when a task reaches the step.

use std::fmt;

/// Where a message goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sink {
    /// A core NATS subject.
    Nats(String),
    /// A subject some JetStream stream captures.
    JetStream(String),
    /// A URL the message is POSTed to.
    Webhook(String),
}

/// What is wrong with a sink. The text names the sink, so an author sees which step to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SinkError {
    #[error("sink {sink:?}: {kind:?} sinks are not supported (supported: {SUPPORTED})")]
    Unsupported { sink: String, kind: String },
    #[error("sink {0:?}: give it as kind:where (supported: {SUPPORTED})")]
    NoKind(String),
    #[error("sink {sink:?}: subject {subject:?} {problem}")]
    BadSubject { sink: String, subject: String, problem: &'static str },
    #[error("sink {0:?}: the url is empty")]
    NoUrl(String),
    #[error("sink {0:?}: a sink is static; put what varies in the step's input")]
    Template(String),
}

const SUPPORTED: &str = "nats:<subject>, jetstream:<subject>, webhook:<url>";

impl Sink {
    pub fn parse(text: &str) -> Result<Sink, SinkError> {
        // A template would be taken literally (configs are not rendered), which is never meant.
        if text.contains("${") {
            return Err(SinkError::Template(text.to_owned()));
        }
        let Some((kind, rest)) = text.split_once(':') else {
            return Err(SinkError::NoKind(text.to_owned()));
        };
        match kind {
            "nats" => check_subject(text, rest).map(|()| Sink::Nats(rest.to_owned())),
            "jetstream" => check_subject(text, rest).map(|()| Sink::JetStream(rest.to_owned())),
            "webhook" if rest.trim().is_empty() => Err(SinkError::NoUrl(text.to_owned())),
            // The URL is checked by the HTTP agent's own rules (see `webhook`).
            "webhook" => Ok(Sink::Webhook(rest.to_owned())),
            _ => Err(SinkError::Unsupported { sink: text.to_owned(), kind: kind.to_owned() }),
        }
    }
}

impl fmt::Display for Sink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Sink::Nats(s) => write!(f, "nats:{s}"),
            Sink::JetStream(s) => write!(f, "jetstream:{s}"),
            Sink::Webhook(u) => write!(f, "webhook:{u}"),
        }
    }
}

/// A subject to publish to: dot-separated tokens, none empty, no whitespace, and no wildcard
/// (`*` and `>` only mean something to subscribers; a publish must name one subject).
fn check_subject(sink: &str, subject: &str) -> Result<(), SinkError> {
    let bad = |problem| Err(SinkError::BadSubject { sink: sink.to_owned(), subject: subject.to_owned(), problem });
    if subject.is_empty() {
        return bad("is empty");
    }
    if subject.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return bad("holds a space or a control character");
    }
    if subject.contains(['*', '>']) {
        return bad("holds a wildcard (* or >): a message goes to one subject");
    }
    if subject.split('.').any(str::is_empty) {
        return bad("has an empty token (a dot at an end, or two dots together)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sinks_parse() {
        assert_eq!(Sink::parse("nats:orders.created"), Ok(Sink::Nats("orders.created".into())));
        assert_eq!(Sink::parse("jetstream:orders.paid"), Ok(Sink::JetStream("orders.paid".into())));
        assert_eq!(Sink::parse("webhook:https://h/x"), Ok(Sink::Webhook("https://h/x".into())));
        assert_eq!(Sink::parse("nats:a.b").map(|s| s.to_string()), Ok("nats:a.b".into()));
    }

    #[test]
    fn bad_sinks_are_named() {
        for (sink, says) in [
            ("sqs:queue", "\"sqs\" sinks are not supported"),
            ("kafka:topic", "\"kafka\" sinks are not supported"),
            ("conductor", "give it as kind:where"),
            ("nats:", "is empty"),
            ("nats:a b", "space"),
            ("nats:a.*", "wildcard"),
            ("jetstream:a.>", "wildcard"),
            ("nats:a..b", "empty token"),
            ("nats:.a", "empty token"),
            ("webhook: ", "url is empty"),
            ("nats:${task.input.subject}", "static"),
        ] {
            let e = Sink::parse(sink).unwrap_err().to_string();
            assert!(e.contains(says), "{sink}: {e}");
            assert!(e.contains(sink), "{sink}: {e}");
        }
        let e = Sink::parse("sqs:q").unwrap_err().to_string();
        assert!(e.contains("nats:<subject>") && e.contains("webhook:<url>"), "{e}");
    }
}
