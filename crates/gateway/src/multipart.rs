//! `multipart/form-data` bodies for uploading one file with a few text
//! fields (Telegram's `sendPhoto`/`sendDocument`, Discord's attachments,
//! Slack's upload URL), built by hand: one small format, no extra dependency.

/// A form: text fields and files, in order.
pub struct Form {
    boundary: String,
    body: Vec<u8>,
}

impl Default for Form {
    fn default() -> Self {
        Self::new()
    }
}

impl Form {
    /// An empty form with a random boundary.
    pub fn new() -> Self {
        let random =
            crate::files::random_hex(16).unwrap_or_else(|_| format!("{:032x}", fastrand::u128(..)));
        Form { boundary: format!("ferroclaw-{random}"), body: Vec::new() }
    }

    /// Adds a text field.
    pub fn text(mut self, name: &str, value: &str) -> Self {
        self.head(name, None, None);
        self.body.extend_from_slice(value.as_bytes());
        self.body.extend_from_slice(b"\r\n");
        self
    }

    /// Adds a file field: its name as the recipient sees it, its type and bytes.
    pub fn file(mut self, name: &str, file_name: &str, media_type: &str, bytes: &[u8]) -> Self {
        self.head(name, Some(file_name), Some(media_type));
        self.body.extend_from_slice(bytes);
        self.body.extend_from_slice(b"\r\n");
        self
    }

    /// The `Content-Type` header value.
    pub fn content_type(&self) -> String {
        format!("multipart/form-data; boundary={}", self.boundary)
    }

    /// The whole body, closing boundary included.
    pub fn bytes(&self) -> Vec<u8> {
        let mut body = self.body.clone();
        body.extend_from_slice(format!("--{}--\r\n", self.boundary).as_bytes());
        body
    }

    fn head(&mut self, name: &str, file_name: Option<&str>, media_type: Option<&str>) {
        // Quotes and line breaks would end the header early: leave them out.
        let clean = |s: &str| s.replace(['"', '\r', '\n', '\\'], "_");
        let mut head = format!(
            "--{}\r\nContent-Disposition: form-data; name=\"{}\"",
            self.boundary,
            clean(name)
        );
        if let Some(f) = file_name {
            head.push_str(&format!("; filename=\"{}\"", clean(f)));
        }
        head.push_str("\r\n");
        if let Some(t) = media_type {
            head.push_str(&format!("Content-Type: {}\r\n", clean(t)));
        }
        head.push_str("\r\n");
        self.body.extend_from_slice(head.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_form_has_its_fields_and_file_between_boundaries_and_quotes_cannot_break_out() {
        let form =
            Form::new().text("chat_id", "42").file("document", "a\"b.txt", "text/plain", b"hello");
        let body = String::from_utf8(form.bytes()).unwrap();
        let boundary = form.content_type().split("boundary=").nth(1).unwrap().to_string();
        assert!(body.starts_with(&format!("--{boundary}\r\n")));
        assert!(body.contains("name=\"chat_id\"\r\n\r\n42\r\n"));
        assert!(body.contains("filename=\"a_b.txt\"\r\nContent-Type: text/plain\r\n\r\nhello\r\n"));
        assert!(body.ends_with(&format!("--{boundary}--\r\n")));
    }
}
