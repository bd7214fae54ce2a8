//! The token rule: one token per whitespace-separated word, so every count is exact and
//! reproducible by hand.
//!
//! - Prompt tokens: the words of every piece of text in the request (system prompt or
//!   instructions, every message's string content or text parts, the Responses `input`);
//!   roles, names, images and tool definitions count nothing.
//! - Completion tokens: the words of the reply, capped by the request's output bound. A
//!   capped reply is its first `bound` words and ends with the provider's "length" reason.

use serde_json::Value;

/// Words in `text` (maximal runs of non-whitespace characters).
pub fn count(text: &str) -> u64 {
    text.split_whitespace().count() as u64
}

/// Every text string in a message `content` (a string, or an array of parts with `text`).
fn content_text<'a>(content: &'a Value, out: &mut Vec<&'a str>) {
    match content {
        Value::String(s) => out.push(s),
        Value::Array(parts) => {
            for part in parts {
                if let Some(Value::String(t)) = part.get("text") {
                    out.push(t);
                } else if let Some(inner) = part.get("content") {
                    // tool_result blocks and Responses items nest their content.
                    content_text(inner, out);
                }
            }
        }
        _ => {}
    }
}

/// The prompt text of a request body: `system` / `instructions`, then every message's or
/// input item's content, in order.
pub fn prompt_texts(body: &Value) -> Vec<&str> {
    let mut out = Vec::new();
    for key in ["system", "instructions"] {
        if let Some(v) = body.get(key) {
            content_text(v, &mut out);
        }
    }
    for key in ["messages", "input"] {
        match body.get(key) {
            Some(Value::Array(items)) => {
                for item in items {
                    if let Some(c) = item.get("content") {
                        content_text(c, &mut out);
                    } else if let Some(Value::String(t)) = item.get("text") {
                        out.push(t);
                    }
                }
            }
            Some(v @ Value::String(_)) => content_text(v, &mut out),
            _ => {}
        }
    }
    out
}

/// Prompt tokens of a request body.
pub fn prompt_tokens(body: &Value) -> u64 {
    prompt_texts(body).into_iter().map(count).sum()
}

/// The reply split into the pieces a stream sends, one per token: the first word, then
/// each later word with one leading space. Joined, they are the reply text.
pub fn reply_pieces(reply: &str, bound: Option<u64>) -> (Vec<String>, bool) {
    let words: Vec<&str> = reply.split_whitespace().collect();
    let cap = bound.map_or(words.len(), |b| usize::try_from(b).unwrap_or(usize::MAX));
    let capped = cap < words.len();
    let pieces = words
        .iter()
        .take(cap)
        .enumerate()
        .map(|(i, w)| {
            if i == 0 {
                (*w).to_string()
            } else {
                format!(" {w}")
            }
        })
        .collect();
    (pieces, capped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn counts_words_of_every_text() {
        assert_eq!(count("  a  b\tc\n"), 3);
        assert_eq!(count(""), 0);
        let chat = json!({"messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "hello there"}, {"type": "image_url", "image_url": {"url": "x"}}]}
        ]});
        assert_eq!(prompt_tokens(&chat), 4);
        let responses = json!({"instructions": "one", "input": "two three"});
        assert_eq!(prompt_tokens(&responses), 3);
        let items = json!({"input": [{"role": "user", "content": [{"type": "input_text", "text": "a b"}]}]});
        assert_eq!(prompt_tokens(&items), 2);
        let anthropic = json!({"system": [{"type": "text", "text": "s t"}], "messages": [{"role": "user", "content": "u"}]});
        assert_eq!(prompt_tokens(&anthropic), 3);
    }

    #[test]
    fn reply_pieces_join_to_the_reply_and_cap() {
        let (p, capped) = reply_pieces("a  b c", None);
        assert_eq!((p.concat(), capped), ("a b c".to_string(), false));
        let (p, capped) = reply_pieces("a b c", Some(2));
        assert_eq!((p, capped), (vec!["a".to_string(), " b".to_string()], true));
        let (p, capped) = reply_pieces("a b", Some(2));
        assert_eq!((p.len(), capped), (2, false));
    }
}
