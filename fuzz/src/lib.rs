//! Input formats shared by the fuzz targets and by `scripts/fuzz-seeds.py`, which writes the
//! seed corpora in them (so a seed is a readable text file, not an opaque `arbitrary` blob).

/// `name\nrest`: a function (or mode) name on the first line, its JSON argument after it.
pub fn named(data: &[u8]) -> Option<(&str, &str)> {
    let text = std::str::from_utf8(data).ok()?;
    Some(text.split_once('\n').unwrap_or((text, "")))
}

/// One captured response: `<operationId or -> <status>\n<Name: value\n>...\n<body bytes>`.
pub struct Exchange<'a> {
    /// The spec operationId, or `None` for `-` (a response that matched no operation).
    pub operation: Option<&'a str>,
    /// HTTP status (any u16, as a server may send).
    pub status: u16,
    /// Header (name, value) pairs in order.
    pub headers: Vec<(&'a str, &'a str)>,
    /// The body's bytes, not necessarily UTF-8.
    pub body: &'a [u8],
}

/// Parses [`Exchange`]'s format; `None` when the head is not it.
pub fn exchange(data: &[u8]) -> Option<Exchange<'_>> {
    let split = data.windows(2).position(|w| w == b"\n\n");
    let (head, body) = match split {
        Some(i) => (&data[..i], &data[i + 2..]),
        None => (data, &[][..]),
    };
    let head = std::str::from_utf8(head).ok()?;
    let mut lines = head.split('\n');
    let (op, status) = lines.next()?.split_once(' ')?;
    let status = status.trim().parse::<u16>().ok()?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n, v.strip_prefix(' ').unwrap_or(v)))
        .collect();
    Some(Exchange {
        operation: (op != "-").then_some(op),
        status,
        headers,
        body,
    })
}
