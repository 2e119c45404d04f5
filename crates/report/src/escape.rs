//! Escaping of capture content for the HTML report: every string that came
//! from a capture (addresses, HTTP request lines, file names) passes through
//! here before it reaches the page.

use serde_json::Value;

/// Escapes text for HTML element content and quoted attribute values.
pub fn escape_html(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 8);
    for ch in s.chars() {
        match ch {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// JSON text safe inside `<script type="application/json">`: `<`, `>`, `&`
/// and the JavaScript line terminators U+2028/U+2029 become `\uXXXX`
/// escapes (only possible inside JSON strings, where they mean the same).
pub fn json_for_script(v: &Value) -> String {
    let s = v.to_string();
    let mut o = String::with_capacity(s.len() + 16);
    for ch in s.chars() {
        match ch {
            '<' => o.push_str("\\u003c"),
            '>' => o.push_str("\\u003e"),
            '&' => o.push_str("\\u0026"),
            '\u{2028}' => o.push_str("\\u2028"),
            '\u{2029}' => o.push_str("\\u2029"),
            c => o.push(c),
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn escapes_markup() {
        assert_eq!(
            escape_html("</script><img src=x onerror=alert(1)> & 'q' \"d\""),
            "&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt; &amp; &#39;q&#39; &quot;d&quot;"
        );
    }

    #[test]
    fn json_cannot_close_the_script_block() {
        let v = json!({ "s": "</script><script>alert(1)</script><!-- \u{2028}\u{2029} &amp;" });
        let s = json_for_script(&v);
        assert!(!s.contains('<') && !s.contains('>') && !s.contains('&'));
        assert!(!s.contains('\u{2028}') && !s.contains('\u{2029}'));
        let back: Value = serde_json::from_str(&s).unwrap();
        assert_eq!(back, v);
    }
}
