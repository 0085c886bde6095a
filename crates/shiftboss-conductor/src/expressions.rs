//! Rewriting Conductor's `${...}` references into our expressions, and the pieces of our
//! expression syntax the importer writes.

use super::importer::Importer;
use super::task_type::Type;
use crate::err;
use serde_json::{Map, Value};
use shiftboss_core::workflow::DefinitionError;

/// One step of a path after its root: `.name`, `['name']` or `[3]`.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Seg {
    Name(String),
    Index(u64),
}

impl Importer {
    /// A Conductor input template with its `${...}` rewritten to ours.
    pub(super) fn template(&mut self, v: &Value, path: &str, loops: &[String]) -> Result<Value, DefinitionError> {
        Ok(match v {
            Value::String(s) => Value::String(self.text(s, path, loops)?),
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| self.template(item, &format!("{path}[{i}]"), loops))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Object(fields) => {
                let mut out = Map::new();
                for (k, item) in fields {
                    out.insert(k.clone(), self.template(item, &format!("{path}.{k}"), loops)?);
                }
                Value::Object(out)
            }
            scalar => scalar.clone(),
        })
    }

    /// One string: text is kept as it is (both languages read `$${` as a literal `${`), each
    /// `${ref}` is rewritten.
    pub(super) fn text(&mut self, s: &str, path: &str, loops: &[String]) -> Result<String, DefinitionError> {
        let mut out = String::with_capacity(s.len());
        let mut done = 0;
        while let Some(offset) = s[done..].find('$') {
            let dollar = done + offset;
            let rest = &s[dollar..];
            if rest.starts_with("$${") {
                out.push_str(&s[done..dollar + 3]);
                done = dollar + 3;
            } else if rest.starts_with("${") {
                out.push_str(&s[done..dollar]);
                let Some(len) = rest.find('}') else {
                    return Err(err(path, "`${` has no closing `}`"));
                };
                let inner = &rest[2..len];
                if inner.trim() == "CPEWF_TASK_ID" {
                    out.push_str(&self.own_id(loops, path)?);
                    done = dollar + len + 1;
                    continue;
                }
                let (root, segs) = parse_ref(inner).map_err(|e| err(path, e))?;
                out.push_str("${");
                out.push_str(&self.resolve(&root, &segs, loops, path)?);
                out.push('}');
                done = dollar + len + 1;
            } else {
                out.push_str(&s[done..=dollar]);
                done = dollar + 1;
            }
        }
        out.push_str(&s[done..]);
        Ok(out)
    }

    /// `${CPEWF_TASK_ID}`, the task's own id: the workflow's id and the task's reference name (and
    /// in a loop, each enclosing loop's pass), as text. The same for every attempt of the step,
    /// it names the step, where Conductor's names one attempt; it is not the `taskId` a poll
    /// hands out, which is not known when the input is made.
    fn own_id(&self, loops: &[String], path: &str) -> Result<String, DefinitionError> {
        let Some(name) = &self.current else {
            return Err(err(path, "`${CPEWF_TASK_ID}` is a task's own id: use it in a task's input"));
        };
        let mut id = format!("${{task.id}}-{name}");
        for l in loops {
            id.push_str(&format!("#${{{l}.output.iteration}}"));
        }
        Ok(id)
    }

    /// A Conductor reference `root.segs`, read at a place inside `loops`, as our expression text.
    pub(super) fn resolve(
        &self,
        root: &str,
        segs: &[Seg],
        loops: &[String],
        path: &str,
    ) -> Result<String, DefinitionError> {
        let shown = || render_conductor(root, segs);
        if root == "workflow" {
            return match segs {
                [Seg::Name(f), rest @ ..] if f == "input" => {
                    Ok(render("task", &[&[Seg::Name("input".into())], rest].concat()))
                }
                [Seg::Name(f), rest @ ..] if f == "variables" => {
                    Ok(render("task", &[&[Seg::Name("variables".into())], rest].concat()))
                }
                [Seg::Name(f)] if f == "workflowId" => Ok("task.id".into()),
                [Seg::Name(f)] if f == "workflowType" => Ok("task.workflow".into()),
                [Seg::Name(f)] if f == "version" => Ok("task.version".into()),
                [Seg::Name(f)] if f == "correlationId" => Ok("task.correlation_id".into()),
                _ => Err(err(
                    path,
                    format!(
                        "`${{{}}}` has no shiftboss equivalent: workflow.input, workflow.variables, \
                         workflow.workflowId, workflow.workflowType, workflow.version and workflow.correlationId map",
                        shown()
                    ),
                )),
            };
        }
        if root == "CPEWF_TASK_ID" {
            return Err(err(
                path,
                "`${CPEWF_TASK_ID}` (the task's own id) has no shiftboss equivalent: a step's id is not known when \
                 its input is made; each step sends an Idempotency-Key of its own, and `${workflow.workflowId}` \
                 names the workflow",
            ));
        }
        let Some(info) = self.refs.get(root) else {
            return Err(err(
                path,
                format!("`${{{}}}`: {root:?} is neither `workflow` nor a task of this workflow", shown()),
            ));
        };
        if !is_root_name(root) {
            return Err(err(
                path,
                format!(
                    "`${{{}}}`: shiftboss expressions read only names of letters, digits and `_`: rename the task \
                     {root:?}",
                    shown()
                ),
            ));
        }
        if !loops.starts_with(&info.loops) {
            let lp = info.loops.last().map(String::as_str).unwrap_or_default();
            return Err(err(
                path,
                format!(
                    "`${{{}}}` reads a task of the loop {lp:?} from outside it: shiftboss gives null there (read \
                     `${{{lp}.output.output}}`, the last pass's output, instead)",
                    shown()
                ),
            ));
        }
        let no = |what: &str| Err(err(path, format!("`${{{}}}`: {what}", shown())));
        let (first, rest) = match segs.split_first() {
            Some((Seg::Name(f), rest)) if f == "input" || f == "output" => (f.as_str(), rest),
            _ => return no("only the input and output of a task can be read"),
        };
        match (info.ty, first) {
            (Type::Simple | Type::SubWorkflow | Type::Inline | Type::Lambda | Type::JqTransform | Type::Dynamic, _)
            | (Type::SetVariable | Type::Event, _)
            | (Type::Wait | Type::Human | Type::Noop | Type::ExclusiveJoin, "output") => Ok(render(root, segs)),
            (Type::StartWorkflow, "output") => match rest {
                [Seg::Name(w)] if w == "workflowId" => Ok(format!("{root}.output.task_id")),
                _ => no("only output.workflowId of a START_WORKFLOW can be read"),
            },
            // The HTTP agent answers an imported task in Conductor's shape.
            (Type::Http, "output") => match rest {
                [Seg::Name(r), ..] if r == "response" => Ok(render(root, segs)),
                _ => no("an HTTP task's output is its response: only output.response… can be read"),
            },
            (Type::Switch, "output") => match rest {
                [Seg::Name(e), Seg::Index(0)] if e == "evaluationResult" => Ok(format!("{root}.output.value")),
                _ => no("only output.evaluationResult[0] of a switch can be read"),
            },
            (Type::DoWhile, "output") => match rest {
                [Seg::Name(i)] if i == "iteration" => Ok(format!("{root}.output.iteration")),
                _ => no("only output.iteration of a loop can be read"),
            },
            // A FORK_JOIN_DYNAMIC's JOIN gives the fork_each's output (keyed by reference name).
            (Type::Join, "output") if self.dynamic_joins.contains_key(root) => {
                Ok(render(&self.dynamic_joins[root], segs))
            }
            (Type::ForkDynamic, "output") => Ok(render(root, segs)),
            (Type::Join, "output") => match rest {
                [Seg::Name(inner), more @ ..] => {
                    self.resolve(inner, &[&[Seg::Name("output".into())], more].concat(), loops, path)
                }
                _ => no("read the output of a joined task instead: output.<taskReferenceName>…"),
            },
            (Type::Http, _) => no("the input of an HTTP step is its request body; read the body's source instead"),
            (ty, _) => no(&format!("a {} task's {first} has no shiftboss equivalent", ty.name())),
        }
    }
}

/// A root our expressions can read: an identifier that is no keyword.
pub(super) fn is_root_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !matches!(name, "null" | "true" | "false")
}

/// Parses the inside of a Conductor `${...}`: a root, then `.name`, `['name']`, `["name"]`, `[n]`.
pub(super) fn parse_ref(text: &str) -> Result<(String, Vec<Seg>), String> {
    let t = text.trim();
    let bad = |why: &str| format!("`${{{text}}}` is not a Conductor reference: {why}");
    let end = t.find(['.', '[']).unwrap_or(t.len());
    let root = &t[..end];
    if root.is_empty() || !root.chars().all(name_char) {
        return Err(bad("it should start with `workflow` or a taskReferenceName"));
    }
    let mut segs = Vec::new();
    let mut rest = &t[end..];
    while let Some(c) = rest.chars().next() {
        if c == '.' {
            let body = &rest[1..];
            let end = body.find(['.', '[']).unwrap_or(body.len());
            let name = &body[..end];
            if name.is_empty() || !name.chars().all(name_char) {
                return Err(bad("expected a field name after `.`"));
            }
            segs.push(Seg::Name(name.to_owned()));
            rest = &body[end..];
        } else {
            let close = rest.find(']').ok_or_else(|| bad("`[` without `]`"))?;
            let inside = rest[1..close].trim();
            let quoted = inside
                .strip_prefix('\'')
                .and_then(|s| s.strip_suffix('\''))
                .or_else(|| inside.strip_prefix('"').and_then(|s| s.strip_suffix('"')));
            match quoted {
                Some(name) if !name.contains(['\\', '\'', '"']) => segs.push(Seg::Name(name.to_owned())),
                Some(_) => return Err(bad("quotes and backslashes in a field name are not supported")),
                None => {
                    let n = inside.parse().map_err(|_| bad("only [n], ['name'] and [\"name\"] are supported"))?;
                    segs.push(Seg::Index(n));
                }
            }
            rest = &rest[close + 1..];
        }
    }
    Ok((root.to_owned(), segs))
}

fn name_char(c: char) -> bool {
    !c.is_whitespace() && !"${}()[]'\"*?@,!=<>&|+/\\".contains(c)
}

/// A path in our expression syntax.
pub(super) fn render(root: &str, segs: &[Seg]) -> String {
    let mut out = root.to_owned();
    for s in segs {
        match s {
            Seg::Name(n) if is_root_name(n) || matches!(n.as_str(), "null" | "true" | "false") => {
                out.push('.');
                out.push_str(n);
            }
            Seg::Name(n) => {
                out.push('[');
                out.push_str(&string_literal(n));
                out.push(']');
            }
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// A path as Conductor writes it, for messages.
pub(super) fn render_conductor(root: &str, segs: &[Seg]) -> String {
    let mut out = root.to_owned();
    for s in segs {
        match s {
            Seg::Name(n) => {
                out.push('.');
                out.push_str(n);
            }
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// A string literal of our expression language.
pub(super) fn string_literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `${expr}`, or the bare expression when it holds a `${` of its own (in a string literal).
pub(super) fn wrap_expr(text: &str) -> String {
    if text.contains("${") || text.contains('}') { text.to_owned() } else { format!("${{{text}}}") }
}
