//! Pictures and files both ways.
//!
//! In: channels download what a person sends through one capped reader
//! ([`download`]) and attach it to the bus message ([`attach`]); the chat's
//! worker turns images into image blocks for the model, scaled to the
//! provider's limits ([`fit`]; a text note for models without images, as the
//! provider layer does), saves documents and voice notes into the
//! workspace's `inbox/` under a safe name and tells the model their path,
//! and has voice notes transcribed where `[gateway] transcription` is set.
//!
//! Out: the `message` tool's `media` names workspace files ([`resolve`]
//! keeps them inside it); channels send each natively ([`Outgoing`]: photo
//! or document by type, within the platform's size limit, else a clear error).

mod resize;

use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use ferroclaw_protocol::{ContentBlock, Message, Role};
use serde_json::{Value, json};

use crate::bus::InboundMessage;
pub use resize::{ImageLimits, ResizeError, fit};

/// The largest file a person may send, unless `[channels.NAME] max_file_mb`
/// says otherwise: bigger ones are refused with a note (Telegram bots cannot
/// download more than 20 MB either).
pub const MAX_INBOUND_BYTES: usize = 20 * 1024 * 1024;
/// Longest file name kept in `inbox/` (the extension is kept when cut).
const MAX_NAME_CHARS: usize = 80;
/// The folder of the workspace that received files go to.
pub const INBOX: &str = "inbox";

/// A file a person sent, downloaded.
#[derive(Debug, Clone, PartialEq)]
pub struct Attachment {
    /// The name it came with (unsafe until [`safe_file_name`]).
    pub name: String,
    /// What the platform says it is (`image/png`, `audio/ogg`, ...).
    pub media_type: String,
    pub bytes: Vec<u8>,
}

impl Attachment {
    /// The image type by its bytes (not by what it claims), if it is one models take.
    pub fn image_type(&self) -> Option<&'static str> {
        ferroclaw_tools::image_media_type(&self.bytes[..self.bytes.len().min(16)])
    }

    /// A voice note or other audio.
    pub fn is_audio(&self) -> bool {
        self.media_type.starts_with("audio/")
    }
}

/// Attaches `file` to `message` (kept in its metadata, base64).
pub fn attach(message: &mut InboundMessage, file: &Attachment) {
    let entry = json!({"name": file.name, "media_type": file.media_type, "data": BASE64.encode(&file.bytes)});
    match message.metadata.get_mut("attachments").and_then(Value::as_array_mut) {
        Some(list) => list.push(entry),
        None => {
            message.metadata.insert("attachments".into(), json!([entry]));
        }
    }
}

/// What a channel downloaded for `message`: the file attached (an empty
/// media type read as `application/octet-stream`), or, when it could not be
/// had, a line in the text telling the model so.
pub fn attach_downloaded(
    message: &mut InboundMessage,
    channel: &str,
    name: String,
    media_type: String,
    got: Result<Vec<u8>, String>,
) {
    match got {
        Ok(bytes) => {
            let media_type =
                if media_type.is_empty() { "application/octet-stream".into() } else { media_type };
            attach(message, &Attachment { name, media_type, bytes });
        }
        Err(e) => {
            tracing::warn!(channel, "{e}");
            message
                .content
                .push_str(&format!("\n[The user sent {name}, which could not be received: {e}]"));
        }
    }
}

/// Why a file a person sent could not be downloaded.
#[derive(Debug, thiserror::Error)]
pub enum DownloadError {
    /// Bigger than the channel's cap (said by the platform, by the
    /// `Content-Length`, or found while reading).
    #[error("it is over the {} limit", size_text(*.limit))]
    TooBig { limit: usize },
    /// The platform could not be reached or refused.
    #[error("download: {0}")]
    Failed(String),
}

/// `bytes` for people: `20 MB`, `512 KB`, `10 bytes`.
pub fn size_text(bytes: usize) -> String {
    match bytes {
        n if n >= 1_048_576 && n % 1_048_576 == 0 => format!("{} MB", n / 1_048_576),
        n if n >= 1_048_576 => format!("{:.1} MB", n as f64 / 1_048_576.0),
        n if n >= 1024 => format!("{} KB", n / 1024),
        n => format!("{n} bytes"),
    }
}

/// Downloads what `request` asks for, at most `max` bytes, for every channel:
/// a `Content-Length` over the cap is refused before the body is read, and
/// the body is read in chunks and given up as soon as it passes the cap (a
/// server that lies about its size or sends no size cannot fill memory).
/// Nothing is written anywhere: the bytes are returned whole or not at all.
pub async fn download(
    request: reqwest::RequestBuilder,
    max: usize,
) -> Result<Vec<u8>, DownloadError> {
    let failed = |e: reqwest::Error| DownloadError::Failed(e.without_url().to_string());
    let mut response = request.send().await.map_err(failed)?;
    if !response.status().is_success() {
        return Err(DownloadError::Failed(format!("HTTP {}", response.status())));
    }
    let declared = response.content_length();
    if declared.is_some_and(|n| n > max as u64) {
        return Err(DownloadError::TooBig { limit: max });
    }
    let mut bytes = Vec::with_capacity(declared.map_or(0, |n| n as usize));
    while let Some(chunk) = response.chunk().await.map_err(failed)? {
        if bytes.len() + chunk.len() > max {
            return Err(DownloadError::TooBig { limit: max });
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// The files attached to `message`.
pub fn attachments(message: &InboundMessage) -> Vec<Attachment> {
    let Some(list) = message.metadata.get("attachments").and_then(Value::as_array) else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|a| {
            Some(Attachment {
                name: a["name"].as_str().unwrap_or("file").to_string(),
                media_type: a["media_type"]
                    .as_str()
                    .unwrap_or("application/octet-stream")
                    .to_string(),
                bytes: BASE64.decode(a["data"].as_str()?).ok()?,
            })
        })
        .collect()
}

/// A name safe to create in `inbox/`: no folders (`../../x` is `x`), only
/// letters, digits, `.`, `-` and `_`, no leading dot, at most 80 characters
/// with the extension kept.
pub fn safe_file_name(name: &str) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or_default();
    let cleaned: String = base
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') { c } else { '_' })
        .collect();
    let cleaned = cleaned.trim_start_matches('.').to_string();
    let cleaned =
        if cleaned.trim_matches(['_', '.']).is_empty() { "file".to_string() } else { cleaned };
    if cleaned.chars().count() <= MAX_NAME_CHARS {
        return cleaned;
    }
    let ext = cleaned.rsplit_once('.').map(|(_, e)| e).filter(|e| e.len() <= 10).unwrap_or("");
    let keep = MAX_NAME_CHARS - ext.len() - usize::from(!ext.is_empty());
    let stem: String = cleaned.chars().take(keep).collect();
    if ext.is_empty() { stem } else { format!("{stem}.{ext}") }
}

/// Saves `bytes` as `workspace/inbox/NAME` (NAME made safe; `-2`, `-3`, ...
/// added rather than overwriting); the path relative to the workspace.
/// Written beneath the workspace without following links: the agent's
/// commands may have made `inbox` a link to `~/.ssh` or an autostart folder,
/// and a sender chooses the file's name and bytes. Whether a name is free
/// is decided by the write itself ([`ferroclaw_tools::Beneath::create_new`]),
/// so a file the agent's commands create meanwhile is never replaced.
pub fn save_in_inbox(workspace: &Path, name: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
    let refused = |e: ferroclaw_tools::ToolError| std::io::Error::other(e.to_string());
    let beneath = ferroclaw_tools::Beneath::open(workspace).map_err(refused)?;
    let name = safe_file_name(name);
    let (stem, ext) = match name.rsplit_once('.') {
        Some((s, e)) if !s.is_empty() => (s.to_string(), format!(".{e}")),
        _ => (name.clone(), String::new()),
    };
    for n in 1..1000 {
        let candidate = if n == 1 { name.clone() } else { format!("{stem}-{n}{ext}") };
        let rel = Path::new(INBOX).join(&candidate);
        if beneath.create_new(&rel, bytes).map_err(refused)? {
            return Ok(rel);
        }
    }
    Err(std::io::Error::other(format!("too many files called {name} in inbox/")))
}

/// The image block for `file` fitted to `limits` (scaled down when over
/// them, passed on as it is when not), or `None` when it is no picture a
/// model can take. A picture that cannot be decoded goes as it is when it is
/// small enough (the provider judges it).
fn image_block(file: &Attachment, limits: ImageLimits) -> Option<ContentBlock> {
    let media_type = file.image_type()?;
    let (bytes, media_type) = match fit(&file.bytes, limits) {
        Ok(None) => (file.bytes.clone(), media_type),
        Ok(Some(fitted)) => fitted,
        Err(ResizeError::Unreadable(_)) if file.bytes.len() <= limits.max_bytes => {
            (file.bytes.clone(), media_type)
        }
        Err(e) => {
            tracing::warn!("{}: {e}", file.name);
            return None;
        }
    };
    Some(ContentBlock::Image { media_type: media_type.into(), data: BASE64.encode(bytes) })
}

/// The user message for `text` with `files`: images as image blocks fitted
/// to `limits`, the rest saved into the workspace's `inbox/` with a note
/// saying where, voice notes with their transcript when `transcribe` gives one.
pub fn user_message(
    text: &str,
    files: Vec<Attachment>,
    workspace: &Path,
    transcripts: &[(usize, Result<String, String>)],
    limits: ImageLimits,
) -> Message {
    let mut content = Vec::new();
    let mut notes = Vec::new();
    for (i, file) in files.into_iter().enumerate() {
        if let Some(block) = image_block(&file, limits) {
            content.push(block);
            continue;
        }
        let kb = file.bytes.len().div_ceil(1024);
        let what = if file.is_audio() { "voice note" } else { "file" };
        match save_in_inbox(workspace, &file.name, &file.bytes) {
            Ok(path) => {
                let mut note = format!(
                    "[The user sent a {what}, saved as {} ({kb} KB, {})",
                    path.display(),
                    file.media_type
                );
                match transcripts.iter().find(|(n, _)| *n == i).map(|(_, t)| t) {
                    Some(Ok(t)) => note.push_str(&format!("; transcript: {t}")),
                    Some(Err(e)) => note.push_str(&format!("; not transcribed: {e}")),
                    None => {}
                }
                note.push(']');
                notes.push(note);
            }
            Err(e) => notes
                .push(format!("[The user sent a {what} ({kb} KB) that could not be saved: {e}]")),
        }
    }
    let mut all = text.trim().to_string();
    for note in notes {
        if !all.is_empty() {
            all.push('\n');
        }
        all.push_str(&note);
    }
    if !all.is_empty() || content.is_empty() {
        content.insert(0, ContentBlock::text(all));
    }
    Message { role: Role::User, content }
}

/// Why a file to send was refused.
#[derive(Debug, thiserror::Error)]
pub enum MediaError {
    #[error("{0}: not inside the workspace; send files from the workspace only")]
    Outside(String),
    #[error("{path}: cannot be read: {reason}")]
    Unreadable { path: String, reason: String },
    #[error("{path} is {size} MB; {channel} takes at most {limit} MB for {kind}")]
    TooBig { path: String, size: String, channel: String, limit: String, kind: &'static str },
}

/// `path` (relative to the workspace, or absolute) as an existing file
/// inside the workspace (symbolic links followed before the check).
pub fn resolve(workspace: &Path, path: &str) -> Result<PathBuf, MediaError> {
    let joined = workspace.join(path);
    // First by the words of the path (no probing of what exists outside),
    // then by the real path.
    let mut lexical = PathBuf::new();
    for part in joined.components() {
        match part {
            std::path::Component::ParentDir => {
                lexical.pop();
            }
            std::path::Component::CurDir => {}
            other => lexical.push(other),
        }
    }
    if !lexical.starts_with(workspace) {
        return Err(MediaError::Outside(path.to_string()));
    }
    let real = joined
        .canonicalize()
        .map_err(|e| MediaError::Unreadable { path: path.to_string(), reason: e.to_string() })?;
    let root = workspace.canonicalize().unwrap_or_else(|_| workspace.to_path_buf());
    if !real.starts_with(&root) {
        return Err(MediaError::Outside(path.to_string()));
    }
    if !real.is_file() {
        return Err(MediaError::Unreadable { path: path.to_string(), reason: "not a file".into() });
    }
    Ok(real)
}

/// A file about to be sent: read, typed, checked against the channel's limits.
#[derive(Debug)]
pub struct Outgoing {
    pub file_name: String,
    pub media_type: String,
    pub bytes: Vec<u8>,
    /// Sent as a picture (shown inline) rather than a document.
    pub photo: bool,
}

impl Outgoing {
    /// Reads `path` for `channel`: an image within `photo_limit` bytes goes as
    /// a photo, anything else within `file_limit` as a document.
    pub fn load(
        path: &str,
        channel: &str,
        photo_limit: u64,
        file_limit: u64,
    ) -> Result<Self, MediaError> {
        let unreadable = |e: std::io::Error| MediaError::Unreadable {
            path: path.to_string(),
            reason: e.to_string(),
        };
        let file = open_no_links(Path::new(path)).map_err(unreadable)?;
        let size = file.metadata().map_err(unreadable)?.len();
        let mb = |n: u64| format!("{:.1}", n as f64 / 1_048_576.0);
        if size > file_limit {
            return Err(MediaError::TooBig {
                path: path.to_string(),
                size: mb(size),
                channel: channel.to_string(),
                limit: mb(file_limit),
                kind: "files",
            });
        }
        let mut bytes = Vec::new();
        {
            use std::io::Read;
            (&file).take(file_limit).read_to_end(&mut bytes).map_err(unreadable)?;
        }
        let image = ferroclaw_tools::image_media_type(&bytes[..bytes.len().min(16)]);
        let photo = image.is_some() && size <= photo_limit;
        let file_name =
            safe_file_name(Path::new(path).file_name().and_then(|n| n.to_str()).unwrap_or("file"));
        let media_type = image.unwrap_or_else(|| guess_type(&file_name)).to_string();
        Ok(Outgoing { file_name, media_type, bytes, photo })
    }
}

/// Opens `path` for reading without following a link anywhere on it. The
/// path was made real by [`resolve`] when the agent asked to send it, and
/// the file is read later (by the channel, after the message was queued):
/// the agent's commands could by then have swapped it, or a folder above it,
/// for a link to `~/.ssh/id_rsa`. Such a swap is refused, not followed.
fn open_no_links(path: &Path) -> std::io::Result<std::fs::File> {
    let root = if path.is_absolute() { Path::new("/") } else { Path::new(".") };
    let rel = path.strip_prefix("/").unwrap_or(path);
    let refused = |e: ferroclaw_tools::ToolError| std::io::Error::other(e.to_string());
    let file =
        ferroclaw_tools::Beneath::open(root).and_then(|b| b.open_read(rel)).map_err(refused)?;
    if file.metadata()?.is_dir() {
        return Err(std::io::Error::other("a folder, not a file"));
    }
    Ok(file)
}

/// A media type from a file name's extension (for documents).
fn guess_type(name: &str) -> &'static str {
    match name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()).as_deref() {
        Some("pdf") => "application/pdf",
        Some("txt" | "md" | "log") => "text/plain",
        Some("csv") => "text/csv",
        Some("json") => "application/json",
        Some("html") => "text/html",
        Some("zip") => "application/zip",
        Some("ogg" | "oga") => "audio/ogg",
        Some("mp3") => "audio/mpeg",
        _ => "application/octet-stream",
    }
}

/// `[gateway] transcription`: an OpenAI-compatible speech-to-text endpoint.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TranscriptionSettings {
    /// The `/audio/transcriptions` URL (e.g. `http://127.0.0.1:8080/v1/audio/transcriptions`).
    pub url: String,
    /// The model to ask for (default `whisper-1`).
    #[serde(default = "default_transcription_model")]
    pub model: String,
    /// Environment variable holding the API key, if the endpoint wants one.
    #[serde(default)]
    pub api_key_env: Option<String>,
}

fn default_transcription_model() -> String {
    "whisper-1".into()
}

/// How long a transcription may take.
const TRANSCRIPTION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// The text of a voice note, from the configured endpoint.
pub async fn transcribe(
    settings: &TranscriptionSettings,
    file: &Attachment,
) -> Result<String, String> {
    let form = crate::multipart::Form::new().text("model", &settings.model).file(
        "file",
        &safe_file_name(&file.name),
        &file.media_type,
        &file.bytes,
    );
    let http = reqwest::Client::builder()
        .timeout(TRANSCRIPTION_TIMEOUT)
        .build()
        .map_err(|e| e.to_string())?;
    let mut request =
        http.post(&settings.url).header("Content-Type", form.content_type()).body(form.bytes());
    if let Some(key) = settings.api_key_env.as_deref().and_then(|v| std::env::var(v).ok()) {
        request = request.bearer_auth(key);
    }
    let response =
        request.send().await.map_err(|e| format!("transcription: {}", e.without_url()))?;
    let status = response.status();
    let body: Value = response
        .json()
        .await
        .map_err(|e| format!("transcription: HTTP {status}: {}", e.without_url()))?;
    match body["text"].as_str() {
        Some(text) if status.is_success() => Ok(text.trim().to_string()),
        _ => Err(format!(
            "transcription: HTTP {status}: {}",
            body["error"]["message"].as_str().unwrap_or("no text")
        )),
    }
}

/// True for `http(s)://` media (sent as links), false for workspace files.
pub fn is_url(media: &str) -> bool {
    media.starts_with("http://") || media.starts_with("https://")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_file_names_are_neutralized() {
        assert_eq!(safe_file_name("../../etc/passwd"), "passwd");
        assert_eq!(safe_file_name("..\\..\\boot.ini"), "boot.ini");
        assert_eq!(safe_file_name(".bashrc"), "bashrc");
        assert_eq!(safe_file_name("../"), "file");
        assert_eq!(safe_file_name("ré sumé;rm -rf.pdf"), "r__sum__rm_-rf.pdf");
        let long = format!("{}.pdf", "a".repeat(500));
        let safe = safe_file_name(&long);
        assert_eq!(safe.len(), 80);
        assert!(safe.ends_with(".pdf"));
    }

    #[test]
    fn documents_land_in_the_inbox_without_overwriting_and_images_become_blocks() {
        let ws = tempfile::tempdir().unwrap();
        let doc = Attachment {
            name: "../../report.pdf".into(),
            media_type: "application/pdf".into(),
            bytes: b"%PDF".to_vec(),
        };
        let png = Attachment {
            name: "p.png".into(),
            media_type: "image/png".into(),
            bytes: b"\x89PNG\r\n\x1a\nrest".to_vec(),
        };
        let m = user_message(
            "look",
            vec![doc.clone(), png, doc],
            ws.path(),
            &[],
            ImageLimits::ANTHROPIC,
        );
        let ContentBlock::Text { text } = &m.content[0] else { panic!("no text first") };
        assert!(
            text.starts_with("look\n[The user sent a file, saved as inbox/report.pdf"),
            "{text}"
        );
        assert!(text.contains("inbox/report-2.pdf"), "{text}");
        assert!(
            matches!(&m.content[1], ContentBlock::Image { media_type, .. } if media_type == "image/png")
        );
        assert_eq!(std::fs::read(ws.path().join("inbox/report.pdf")).unwrap(), b"%PDF");
        assert!(!ws.path().join("report.pdf").exists());
    }

    #[cfg(unix)]
    #[test]
    fn a_sent_file_is_not_written_through_an_inbox_the_agent_linked_elsewhere() {
        let ws = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), ws.path().join("inbox")).unwrap();
        let err =
            save_in_inbox(ws.path(), "authorized_keys", b"ssh-ed25519 AAAA evil").unwrap_err();
        assert!(!outside.path().join("authorized_keys").exists(), "written outside: {err}");
        std::fs::remove_file(ws.path().join("inbox")).unwrap();
        std::fs::create_dir(ws.path().join("inbox")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("x"), ws.path().join("inbox/notes.txt"))
            .unwrap();
        assert_eq!(
            save_in_inbox(ws.path(), "notes.txt", b"hi").unwrap(),
            Path::new("inbox/notes-2.txt")
        );
        assert!(!outside.path().join("x").exists());
    }

    #[test]
    fn a_big_picture_reaches_the_model_scaled_to_the_providers_limits() {
        let ws = tempfile::tempdir().unwrap();
        let picture =
            image::RgbImage::from_fn(2000, 500, |x, _| image::Rgb([(x % 256) as u8, 0, 0]));
        let mut png = std::io::Cursor::new(Vec::new());
        picture.write_to(&mut png, image::ImageFormat::Png).unwrap();
        let file = Attachment {
            name: "wide.png".into(),
            media_type: "image/png".into(),
            bytes: png.into_inner(),
        };
        let m = user_message("", vec![file], ws.path(), &[], ImageLimits::ANTHROPIC);
        let ContentBlock::Image { media_type, data } = &m.content[0] else { panic!("{m:?}") };
        assert_eq!(media_type, "image/jpeg");
        let bytes = BASE64.decode(data).unwrap();
        let scaled = image::load_from_memory(&bytes).unwrap();
        // 4:1 kept, within 1568 px on the long side.
        assert_eq!((scaled.width(), scaled.height()), (1568, 392));
    }

    #[test]
    fn files_to_send_stay_inside_the_workspace_and_over_the_limit_is_a_clear_error() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("a.txt"), "hello").unwrap();
        let outside = tempfile::NamedTempFile::new().unwrap();
        assert!(resolve(ws.path(), "a.txt").is_ok());
        let err = resolve(ws.path(), outside.path().to_str().unwrap()).unwrap_err();
        assert!(err.to_string().contains("not inside the workspace"), "{err}");
        assert!(matches!(resolve(ws.path(), "../x"), Err(MediaError::Outside(_))));
        assert!(matches!(resolve(ws.path(), "/etc/passwd"), Err(MediaError::Outside(_))));
        let path = ws.path().join("a.txt");
        let err = Outgoing::load(path.to_str().unwrap(), "telegram", 1, 2).unwrap_err().to_string();
        assert!(err.contains("telegram takes at most 0.0 MB"), "{err}");
        let ok = Outgoing::load(path.to_str().unwrap(), "telegram", 10, 10).unwrap();
        assert!(!ok.photo);
        assert_eq!(ok.media_type, "text/plain");
    }

    #[cfg(unix)]
    #[test]
    fn a_file_swapped_for_a_link_after_the_check_is_not_sent() {
        let ws = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("id_rsa"), "PRIVATE KEY").unwrap();
        std::fs::create_dir(ws.path().join("out")).unwrap();
        std::fs::write(ws.path().join("out/report.txt"), "fine").unwrap();
        let checked = resolve(ws.path(), "out/report.txt").unwrap();
        let checked = checked.to_str().unwrap();
        // The agent's next command, before the channel reads the file.
        std::fs::remove_file(ws.path().join("out/report.txt")).unwrap();
        std::os::unix::fs::symlink(home.path().join("id_rsa"), ws.path().join("out/report.txt"))
            .unwrap();
        assert!(Outgoing::load(checked, "telegram", 100, 100).is_err(), "sent through a link");
        // The same with a folder on the way swapped.
        std::fs::rename(ws.path().join("out"), ws.path().join("old")).unwrap();
        std::fs::write(home.path().join("report.txt"), "PRIVATE").unwrap();
        std::os::unix::fs::symlink(home.path(), ws.path().join("out")).unwrap();
        assert!(Outgoing::load(checked, "telegram", 100, 100).is_err(), "sent through a link");
    }
}
