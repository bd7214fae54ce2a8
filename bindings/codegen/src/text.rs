//! Doc-comment text: rustdoc's Markdown to each host's markup, and word wrapping.

/// Rustdoc Markdown to reStructuredText: intra-doc links and `code` become ``code``.
pub fn rst(s: &str) -> String {
    code_spans(&links(s), "``")
}

/// Rustdoc Markdown to JSDoc / Javadoc-neutral text: intra-doc links become `code`.
pub fn md(s: &str) -> String {
    links(s)
}

/// `[`X`](path)` and `[`X`]` to `` `X` ``.
fn links(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("[`") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let Some(end) = after.find("`]") else {
            out.push_str(&rest[i..]);
            return out;
        };
        out.push_str(&after[..end + 1]);
        rest = &after[end + 2..];
        if rest.starts_with('(') {
            if let Some(close) = rest.find(')') {
                rest = &rest[close + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Every `code` span delimited by `mark` instead of one backtick.
fn code_spans(s: &str, mark: &str) -> String {
    let mut out = String::new();
    for (i, part) in s.split('`').enumerate() {
        if i > 0 {
            out.push_str(mark);
        }
        out.push_str(part);
    }
    out
}

/// The words of a paragraph, a `code span` or a Javadoc `{@tag ...}` with spaces counted as
/// one word (a line break inside one is legal, but hard to read).
fn words(p: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut code = false;
    let mut tag = false;
    for w in p.split_whitespace() {
        if code || tag {
            let last = out.last_mut().expect("an open span has a word");
            last.push(' ');
            last.push_str(w);
        } else {
            out.push(w.to_string());
        }
        if w.matches('`').count() % 2 == 1 {
            code = !code;
        }
        if w.contains("{@") {
            tag = true;
        }
        if tag && w.rfind('}') > w.rfind("{@") {
            tag = false;
        }
    }
    out
}

/// A wire (snake_case) name in camelCase, as TypeScript and Java spell members.
pub fn camel(s: &str) -> String {
    let mut out = String::new();
    let mut up = false;
    for c in s.chars() {
        if c == '_' {
            up = true;
        } else if up {
            out.extend(c.to_uppercase());
            up = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// One paragraph re-wrapped to `width` columns.
pub fn wrap(p: &str, width: usize) -> String {
    let mut lines = Vec::new();
    let mut line = String::new();
    for w in words(p) {
        let w = w.as_str();
        if !line.is_empty() && line.len() + 1 + w.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(w);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines.join("\n")
}

/// A `/** ... */` doc comment (JSDoc, KDoc) at `indent`: one line when it fits in 100
/// columns, else its paragraphs wrapped to 100 columns.
pub fn doc_block(out: &mut String, indent: &str, text: &str) {
    use std::fmt::Write;
    let one = format!("{indent}/** {text} */");
    if !text.contains('\n') && one.len() <= 100 {
        writeln!(out, "{one}").unwrap();
        return;
    }
    writeln!(out, "{indent}/**").unwrap();
    for (i, p) in text.split("\n\n").enumerate() {
        if i > 0 {
            writeln!(out, "{indent} *").unwrap();
        }
        for l in wrap(p, 100 - indent.len() - 3).lines() {
            writeln!(out, "{indent} * {l}").unwrap();
        }
    }
    writeln!(out, "{indent} */").unwrap();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_and_code_spans_become_rst_literals() {
        assert_eq!(
            rst("see [`JsonObject`](super::JsonObject) and [`X`], `a`"),
            "see ``JsonObject`` and ``X``, ``a``"
        );
    }

    #[test]
    fn wrap_keeps_words_whole() {
        assert_eq!(wrap("aa bb\ncc dd", 5), "aa bb\ncc dd");
        assert_eq!(wrap("aaaaaa b", 3), "aaaaaa\nb");
        assert_eq!(wrap("a `b c` d", 3), "a\n`b c`\nd");
        assert_eq!(wrap("a {@link B c} d", 3), "a\n{@link B c}\nd");
        assert_eq!(wrap("{@code x} y", 3), "{@code x}\ny");
    }
}
