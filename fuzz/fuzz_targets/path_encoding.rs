//! Reservation-id path encoding: any id a caller may use (`check_path_id` accepts it) is
//! exactly ONE path segment of the joined URL, percent-decoding back to the id; the encoding
//! uses only unreserved characters and `%XX`. Base URLs of any text parse or fail cleanly. The
//! id's journal file names are a record name and a plain legacy name.
#![no_main]

use cycles_core::journal::names;
use cycles_core::transport::url::{check_path_id, encode_segment, BaseUrl};
use libfuzzer_sys::fuzz_target;
use percent_encoding::percent_decode_str;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (base, id) = text
        .split_once('\n')
        .unwrap_or(("http://127.0.0.1:1/p", text));
    let enc = encode_segment(id);
    let b = enc.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            assert!(i + 2 < b.len(), "{enc}");
            assert!(
                b[i + 1].is_ascii_hexdigit() && b[i + 2].is_ascii_hexdigit(),
                "{enc}"
            );
            i += 3;
        } else {
            assert!(
                b[i].is_ascii_alphanumeric() || b"-._~".contains(&b[i]),
                "{enc}"
            );
            i += 1;
        }
    }
    assert_eq!(percent_decode_str(&enc).decode_utf8().unwrap(), id);
    let base = match BaseUrl::parse(base) {
        Ok(b) => b,
        Err(_) => BaseUrl::parse("http://127.0.0.1:1/p").unwrap(),
    };
    let root: Vec<String> = base
        .as_url()
        .path_segments()
        .unwrap()
        .map(String::from)
        .collect();
    let url = base.join(&["reservations", id, "commit"], &[]);
    // The journal's file names of the id: the standard one is always a record name, the
    // legacy one a plain file name (no separator, no dot-segment) ending in `.json`.
    let standard = names::record_file_name(id);
    assert!(names::is_record_file_name(&standard), "{standard}");
    assert!(matches!(
        names::classify(&standard),
        names::EntryKind::Record
    ));
    let legacy = names::legacy_file_name(id);
    let stem = legacy.strip_suffix(".json").expect("ends in .json");
    assert!(
        stem.bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-'),
        "{legacy}"
    );
    if check_path_id("reservation_id", id).is_err() {
        return;
    }
    let segs: Vec<&str> = url.path_segments().expect("a path").collect();
    // The root ends with '/', so its last segment is empty and is replaced by "v1".
    assert_eq!(segs.len(), root.len() + 3, "{url}");
    assert_eq!(segs[segs.len() - 3], "reservations");
    assert_eq!(segs[segs.len() - 1], "commit");
    let got = percent_decode_str(segs[segs.len() - 2])
        .decode_utf8()
        .unwrap();
    assert_eq!(got, id, "{url}");
    assert_eq!(url.query(), None);
    assert_eq!(url.fragment(), None);
    assert_eq!(url.host_str(), base.as_url().host_str());
});
