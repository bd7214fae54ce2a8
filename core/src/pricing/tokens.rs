//! The prompt-token estimate and the output bound of a provider request (OpenAI Chat
//! Completions, OpenAI Responses, Anthropic Messages; the request body as JSON).
//!
//! An estimate, not a tokenizer: it only has to be the same in every language and close
//! enough to reserve; the provider's reported usage settles the real amount. A host with an
//! exact tokenizer (e.g. tiktoken) may pass its own count to [`crate::pricing::charge`].
//!
//! Rules:
//! - `text_tokens(text) = ceil(chars / 4)`, `chars` the text's Unicode scalar values (not
//!   bytes, not UTF-16 units): English runs at about four characters a token.
//! - A *message* is the request's `system` (Anthropic), its `instructions` (Responses), each
//!   item of `messages` or `input`, or a string `input` (one message).
//! - A message's texts: its `content` when a string; else of each part of an array `content`,
//!   its `text` string, or (tool results, Responses items) the texts of its nested `content`;
//!   an item without `content` but with a `text` string is that text. Roles, names, images,
//!   audio, files and tool definitions count nothing.
//! - `prompt_tokens = Σ per message (MESSAGE_OVERHEAD + Σ text_tokens of its texts)`, with
//!   `MESSAGE_OVERHEAD = 4` (role and framing tokens every provider adds).
//! - A host with an exact tokenizer counts the texts [`messages`] lists itself and hands the
//!   counts back in the same shape ([`counted_prompt_tokens`]): the framing rule stays here,
//!   so an exact count differs from the estimate only by the tokenizer.
//! - `output_bound` = the smallest present of `max_tokens`, `max_completion_tokens`,
//!   `max_output_tokens` (a Chat Completions request may carry the first two; the provider
//!   honours the smaller), else the configured default, else none. `null` counts as absent; a
//!   value that is not a non-negative integer is INVALID_ARGUMENT.

use serde_json::Value;

use crate::error::Error;

/// Tokens charged per message for its role and framing.
pub const MESSAGE_OVERHEAD: u64 = 4;

/// Characters per estimated token.
pub const CHARS_PER_TOKEN: u64 = 4;

/// The request members that bound the output, in the order they are read.
pub const OUTPUT_BOUND_KEYS: [&str; 3] =
    ["max_tokens", "max_completion_tokens", "max_output_tokens"];

/// `text_tokens = ceil(chars / 4)`, `chars` counted in Unicode scalar values.
pub fn text_tokens(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(CHARS_PER_TOKEN)
}

/// Every text of one message's `content` (a string, or parts with `text` or nested `content`).
fn content_texts<'a>(content: &'a Value, out: &mut Vec<&'a str>) {
    match content {
        Value::String(s) => out.push(s),
        Value::Array(parts) => {
            for part in parts {
                if let Some(Value::String(t)) = part.get("text") {
                    out.push(t);
                } else if let Some(inner) = part.get("content") {
                    content_texts(inner, out);
                }
            }
        }
        _ => {}
    }
}

/// The request's messages, each as its texts, in order: `system`, `instructions`, then the
/// items of `messages` and `input` (a string `input` is one message).
pub fn messages(request: &Value) -> Vec<Vec<&str>> {
    let mut out = Vec::new();
    for key in ["system", "instructions"] {
        if let Some(v) = request.get(key).filter(|v| !v.is_null()) {
            let mut texts = Vec::new();
            content_texts(v, &mut texts);
            out.push(texts);
        }
    }
    for key in ["messages", "input"] {
        match request.get(key) {
            Some(Value::Array(items)) => {
                for item in items {
                    let mut texts = Vec::new();
                    if let Some(c) = item.get("content") {
                        content_texts(c, &mut texts);
                    } else if let Some(Value::String(t)) = item.get("text") {
                        texts.push(t);
                    }
                    out.push(texts);
                }
            }
            Some(Value::String(s)) => out.push(vec![s.as_str()]),
            _ => {}
        }
    }
    out
}

/// `prompt_tokens = Σ per message (4 + Σ ceil(chars / 4))`; a body that is not an object
/// has no messages and estimates 0.
pub fn prompt_tokens(request: &Value) -> u64 {
    messages(request)
        .iter()
        .map(|texts| {
            texts
                .iter()
                .map(|t| text_tokens(t))
                .fold(MESSAGE_OVERHEAD, u64::saturating_add)
        })
        .fold(0, u64::saturating_add)
}

/// `Σ per message (4 + Σ text_tokens[i][j])`: the prompt of `request` as a host's tokenizer
/// counted it, `text_tokens[i][j]` being the tokens of text `j` of message `i` of
/// [`messages`]. A shape that is not the request's is INVALID_ARGUMENT (the counts would
/// belong to some other request).
pub fn counted_prompt_tokens(request: &Value, text_tokens: &[Vec<u64>]) -> Result<u64, Error> {
    let msgs = messages(request);
    if msgs.len() != text_tokens.len() {
        return Err(Error::invalid_argument(format!(
            "text_tokens has {} messages; the request has {}",
            text_tokens.len(),
            msgs.len()
        )));
    }
    let mut total: u64 = 0;
    for (i, (texts, counts)) in msgs.iter().zip(text_tokens).enumerate() {
        if texts.len() != counts.len() {
            return Err(Error::invalid_argument(format!(
                "text_tokens[{i}] has {} texts; message {i} of the request has {}",
                counts.len(),
                texts.len()
            )));
        }
        total = counts
            .iter()
            .fold(total.saturating_add(MESSAGE_OVERHEAD), |t, c| {
                t.saturating_add(*c)
            });
    }
    Ok(total)
}

/// The request's own output bound: the smallest present of [`OUTPUT_BOUND_KEYS`].
pub fn request_output_bound(request: &Value) -> Result<Option<u64>, Error> {
    let mut bound: Option<u64> = None;
    for key in OUTPUT_BOUND_KEYS {
        match request.get(key) {
            None | Some(Value::Null) => {}
            Some(v) => {
                let n = v.as_u64().ok_or_else(|| {
                    Error::invalid_argument(format!(
                        "{key} must be a non-negative integer, not {v}"
                    ))
                })?;
                bound = Some(bound.map_or(n, |b| b.min(n)));
            }
        }
    }
    Ok(bound)
}

/// `output_bound = the request's bound, else default, else none`.
pub fn output_bound(request: &Value, default: Option<u64>) -> Result<Option<u64>, Error> {
    Ok(request_output_bound(request)?.or(default))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_tokens_round_up_by_characters() {
        assert_eq!(text_tokens(""), 0);
        assert_eq!(text_tokens("abcd"), 1);
        assert_eq!(text_tokens("abcde"), 2);
        // Four characters, twelve UTF-8 bytes: one token.
        assert_eq!(text_tokens("日本語文"), 1);
    }

    #[test]
    fn every_wire_format_counts_its_messages() {
        let chat = json!({"messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "hello there"}, {"type": "image_url", "image_url": {"url": "x"}}]}
        ]});
        // (4 + 2) + (4 + 3)
        assert_eq!(prompt_tokens(&chat), 13);
        let responses = json!({"instructions": "one", "input": "two three"});
        assert_eq!(prompt_tokens(&responses), (4 + 1) + (4 + 3));
        let anthropic = json!({"system": [{"type": "text", "text": "s t"}], "messages": [{"role": "user", "content": "u"}]});
        assert_eq!(prompt_tokens(&anthropic), (4 + 1) + (4 + 1));
        assert_eq!(prompt_tokens(&json!([1])), 0);
    }

    #[test]
    fn counted_prompts_keep_the_framing_and_check_the_shape() {
        let chat = json!({"messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
        ]});
        assert_eq!(messages(&chat), vec![vec!["be brief"], vec!["a", "b"]]);
        assert_eq!(
            counted_prompt_tokens(&chat, &[vec![2], vec![1, 1]]).unwrap(),
            (4 + 2) + (4 + 1 + 1)
        );
        let e = counted_prompt_tokens(&chat, &[vec![2]]).unwrap_err();
        assert_eq!(e.message(), "text_tokens has 1 messages; the request has 2");
        let e = counted_prompt_tokens(&chat, &[vec![2], vec![1]]).unwrap_err();
        assert_eq!(
            e.message(),
            "text_tokens[1] has 1 texts; message 1 of the request has 2"
        );
    }

    #[test]
    fn output_bound_is_the_smallest_else_the_default() {
        let both = json!({"max_tokens": 50, "max_completion_tokens": 20});
        assert_eq!(output_bound(&both, Some(9)).unwrap(), Some(20));
        assert_eq!(
            output_bound(&json!({"max_tokens": null}), Some(9)).unwrap(),
            Some(9)
        );
        assert_eq!(output_bound(&json!({}), None).unwrap(), None);
        let e = output_bound(&json!({"max_output_tokens": -1}), None).unwrap_err();
        assert_eq!(
            e.message(),
            "max_output_tokens must be a non-negative integer, not -1"
        );
    }
}
