//! JSON written the way Python's `json.dumps` writes it by default — `", "` between items and
//! `": "` after keys — which is how chat models trained on Python-made tool calls write their
//! own (Qwen2.5 under `<tool_call>`). Teaching a pretrained model its calls in this spacing
//! keeps the reply close to what it already writes; the grammar accepts both spacings.

use std::io;

use serde::Serialize;
use serde_json::ser::{Formatter, Serializer};
use serde_json::Value;

struct Spaced;

/// `", "` before every item but the first.
fn separator<W: ?Sized + io::Write>(w: &mut W, first: bool) -> io::Result<()> {
    if first {
        Ok(())
    } else {
        w.write_all(b", ")
    }
}

impl Formatter for Spaced {
    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        separator(w, first)
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        separator(w, first)
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }
}

/// `value` as one line of JSON with Python's default spacing (non-ASCII written as is).
pub fn to_spaced_json(value: &Value) -> String {
    let mut out = Vec::new();
    let mut ser = Serializer::with_formatter(&mut out, Spaced);
    // Writing a `Value` into a Vec cannot fail, and serde_json writes valid UTF-8.
    value.serialize(&mut ser).expect("a JSON value serializes");
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn spaces_like_python_and_reads_back() {
        let v = json!({"name": "set", "arguments": {"values": [1, 2.5, "a,b"], "x": {}, "y": []}});
        let s = to_spaced_json(&v);
        assert_eq!(
            s,
            r#"{"name": "set", "arguments": {"values": [1, 2.5, "a,b"], "x": {}, "y": []}}"#
        );
        assert_eq!(serde_json::from_str::<Value>(&s).unwrap(), v);
        assert_eq!(to_spaced_json(&json!("café \"q\"")), "\"café \\\"q\\\"\"");
    }
}
