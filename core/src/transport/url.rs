//! URL building: base URL normalisation, `/v1` paths and path-segment percent-encoding.

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use url::Url;

use crate::error::Error;

/// Everything except RFC 3986 unreserved characters is encoded, so an id is always exactly
/// ONE path segment: `/`, `?`, `#`, `%`, spaces and non-ASCII can never change the path.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Percent-encodes one path segment.
pub fn encode_segment(s: &str) -> String {
    utf8_percent_encode(s, SEGMENT).to_string()
}

/// A validated server root. Joining always appends below the root's path, whether or not
/// the configured URL ended with a slash, so `https://h/prefix` and `https://h/prefix/`
/// both give `https://h/prefix/v1/...`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BaseUrl {
    url: Url,
}

impl BaseUrl {
    /// Parses and checks a base URL: http or https, a host, no query or fragment. Errors
    /// do not echo the URL, which might carry credentials.
    pub fn parse(s: &str) -> Result<BaseUrl, Error> {
        let mut url = Url::parse(s.trim())
            .map_err(|e| Error::config(format!("base URL cannot be parsed ({e})")))?;
        if url.scheme() != "http" && url.scheme() != "https" {
            return Err(Error::config("base URL must use http or https"));
        }
        if url.host().is_none() {
            return Err(Error::config("base URL has no host"));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(Error::config("base URL must not have a query or fragment"));
        }
        // Normalise the path to end in exactly one '/' so joining is pure concatenation.
        let path = url.path().trim_end_matches('/').to_string();
        url.set_path(&format!("{path}/"));
        Ok(BaseUrl { url })
    }

    /// `{root}/v1/{segments...}` where each segment is percent-encoded, then `query`.
    pub fn join(&self, segments: &[&str], query: &[(&'static str, String)]) -> Url {
        let mut path = self.url.path().to_string(); // ends with '/'
        path.push_str("v1");
        for s in segments {
            path.push('/');
            path.push_str(&encode_segment(s));
        }
        let mut url = self.url.clone();
        // Already percent-encoded: set_path keeps existing %XX escapes as they are.
        url.set_path(&path);
        if !query.is_empty() {
            url.query_pairs_mut()
                .extend_pairs(query.iter().map(|(k, v)| (*k, v.as_str())));
        }
        url
    }

    /// The normalised root (always ends with '/').
    pub fn as_url(&self) -> &Url {
        &self.url
    }
}

/// Checks a reservation or evidence id before it is put into a path: it must be non-empty
/// and not `.`/`..`, which URL normalisation would resolve as dot-segments (even when
/// percent-encoded as `%2E`) and so silently address a different resource.
pub fn check_path_id(what: &str, id: &str) -> Result<(), Error> {
    if id.is_empty() {
        return Err(Error::invalid_argument(format!("{what} must not be empty")));
    }
    if id == "." || id == ".." {
        return Err(Error::invalid_argument(format!(
            "{what} must not be \".\" or \"..\""
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailing_slash_and_prefix() {
        for (base, want) in [
            ("http://h:1", "http://h:1/v1/reservations"),
            ("http://h:1/", "http://h:1/v1/reservations"),
            ("http://h:1/prefix", "http://h:1/prefix/v1/reservations"),
            ("http://h:1/prefix/", "http://h:1/prefix/v1/reservations"),
            ("http://h:1/a/b//", "http://h:1/a/b/v1/reservations"),
            ("https://h", "https://h/v1/reservations"),
        ] {
            let b = BaseUrl::parse(base).unwrap();
            assert_eq!(b.join(&["reservations"], &[]).as_str(), want, "{base}");
        }
    }

    #[test]
    fn id_is_one_segment() {
        let b = BaseUrl::parse("http://h/p/").unwrap();
        let u = b.join(&["reservations", "rsv/a b?#%x", "commit"], &[]);
        assert_eq!(
            u.as_str(),
            "http://h/p/v1/reservations/rsv%2Fa%20b%3F%23%25x/commit"
        );
        assert_eq!(u.path_segments().unwrap().count(), 5);
        assert_eq!(u.query(), None);
        let u = b.join(&["reservations", "é…"], &[]);
        assert_eq!(u.path(), "/p/v1/reservations/%C3%A9%E2%80%A6");
        assert_eq!(encode_segment("a-b.c_d~e"), "a-b.c_d~e");
    }

    #[test]
    fn dot_ids_rejected() {
        assert!(check_path_id("reservation_id", "..").is_err());
        assert!(check_path_id("reservation_id", ".").is_err());
        assert!(check_path_id("reservation_id", "").is_err());
        assert!(check_path_id("reservation_id", "...").is_ok());
    }

    #[test]
    fn query_is_encoded() {
        let b = BaseUrl::parse("http://h").unwrap();
        let u = b.join(
            &["reservations"],
            &[
                ("tenant", "a&b=c".into()),
                ("include", "metadata,evidence".into()),
            ],
        );
        let pairs: Vec<(String, String)> = u.query_pairs().into_owned().collect();
        assert_eq!(
            pairs,
            vec![
                ("tenant".into(), "a&b=c".into()),
                ("include".into(), "metadata,evidence".into())
            ]
        );
    }

    #[test]
    fn bad_base_urls() {
        for b in [
            "",
            "nope",
            "ftp://h",
            "http://h?x=1",
            "http://h#f",
            "mailto:a@b",
        ] {
            assert!(BaseUrl::parse(b).is_err(), "{b}");
        }
        let e = BaseUrl::parse("ftp://user:sekrit@h").unwrap_err();
        assert!(!e.to_string().contains("sekrit"));
    }
}
