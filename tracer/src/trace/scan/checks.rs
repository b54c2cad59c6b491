//! What the reader checks of a line it could not take, to say why: a second `type` key, strings that alone
//! are not valid JSON (an invalid escape, a lone surrogate, bytes that are not UTF-8), and a first line that
//! is a tracer header of a schema no tracer writes.

use std::{borrow::Cow, fmt, path::Path};

use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;

use crate::trace::schema::{FORMAT, Header, SCHEMA};

/// The top-level keys of a JSON object spelling `type` (escaped or not), counted.
struct TypeKeys(usize);

impl<'de> Deserialize<'de> for TypeKeys {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Keys;
        impl<'de> Visitor<'de> for Keys {
            type Value = TypeKeys;
            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TypeKeys, A::Error> {
                let mut n = 0usize;
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    if key == "type" {
                        n = n.saturating_add(1);
                    }
                    map.next_value::<IgnoredAny>()?;
                }
                Ok(TypeKeys(n))
            }
        }
        deserializer.deserialize_map(Keys)
    }
}

/// Whether the line, an object, has more than one `type` key: a record that says two kinds is none of them.
/// `from` is where to look for a second one (after the writer's leading `{"type":"...`); a key spelt with an
/// escape is found too.
pub(crate) fn second_type_key(line: &[u8], from: usize) -> bool {
    let rest = line.get(from..).unwrap_or_default();
    if memchr::memmem::find(rest, b"\"type\"").is_none() && memchr::memmem::find(rest, b"\\u").is_none() {
        return false;
    }
    serde_json::from_slice::<TypeKeys>(line).is_ok_and(|k| k.0 > 1)
}

/// The error a line with a second `type` key is skipped for.
pub(crate) fn second_type_error() -> serde_json::Error {
    serde::de::Error::custom("a second `type` key: a record of two kinds")
}

/// The line with every string that is not valid JSON alone (an invalid escape, a lone surrogate, a control
/// character, bytes that are not UTF-8) made empty, if there was one; None where every string is valid, or
/// one is not closed (then the line is not JSON at all).
pub(crate) fn bad_strings_emptied(line: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(line.len());
    let mut emptied = false;
    let mut at = 0;
    while let Some(&b) = line.get(at) {
        if b != b'"' {
            out.push(b);
            at += 1;
            continue;
        }
        let mut end = at + 1;
        loop {
            match line.get(end)? {
                b'\\' => end += 2,
                b'"' => break,
                _ => end += 1,
            }
        }
        let token = &line[at..=end];
        if serde_json::from_slice::<Cow<'_, str>>(token).is_ok() {
            out.extend_from_slice(token);
        } else {
            out.extend_from_slice(b"\"\"");
            emptied = true;
        }
        at = end + 1;
    }
    emptied.then_some(out)
}

/// At most 40 characters of a value, to name it in a sentence.
fn shown(v: &Value) -> String {
    let text = v.to_string();
    match text.char_indices().nth(40) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    }
}

/// Why a file whose first line did not read as a record is refused, in one sentence: a tracer header whose
/// `schema` no tracer writes, one of another shape, or not a tracer header at all.
pub(crate) fn not_a_header(path: &Path, line: &[u8]) -> String {
    let p = path.display();
    let not_ours = format!(
        "{p} is not a tracer trace file (its first line is not a tracer header); record one with `tracer record -o FILE`"
    );
    let Ok(Value::Object(obj)) = serde_json::from_slice::<Value>(line) else { return not_ours };
    if obj.get("type").and_then(Value::as_str) != Some("header")
        || obj.get("format").and_then(Value::as_str) != Some(FORMAT)
    {
        return not_ours;
    }
    match obj.get("schema") {
        None => format!("{p} has a tracer header without a `schema`: no tracer wrote it"),
        Some(Value::Number(n)) if n.as_u64().is_none_or(|v| u32::try_from(v).is_err()) => format!(
            "{p} has a tracer header of schema {}, which no tracer writes (a schema is a whole number below 2^32); this \
             tracer reads schemas up to {SCHEMA}",
            shown(&Value::Number(n.clone()))
        ),
        Some(v @ Value::Number(_)) => match serde_json::from_slice::<Header>(line) {
            Err(e) => format!("{p} has a tracer header of schema {v} that this tracer cannot read ({e})"),
            Ok(_) => not_ours,
        },
        Some(v) => format!(
            "{p} has a tracer header whose `schema` is {}, not a number: no tracer wrote it; this tracer reads \
             schemas up to {SCHEMA}",
            shown(v)
        ),
    }
}
