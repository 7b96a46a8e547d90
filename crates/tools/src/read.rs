//! `read`: a text file as numbered lines, or an image as an image part.

use std::borrow::Cow;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use async_trait::async_trait;
use base64::Engine;
use ferroclaw_protocol::ResultPart;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::file_limit::{BINARY_SNIFF_BYTES, check_size, looks_binary};
use crate::lines::push_numbered;
use crate::read_ledger::{FileRead, Shown};
use crate::tool_input::{AtLeastOne, at_least_one, parse, schema_for};
use crate::{Beneath, Sandbox, Tool, ToolContext, ToolError, ToolOutput};

/// Lines shown when no `limit` is given (Claude Code's Read default).
pub const DEFAULT_READ_LINES: usize = 2000;
/// Images larger than this are refused (Anthropic's per-image API limit is 5 MB).
pub const MAX_IMAGE_BYTES: u64 = 5 * 1024 * 1024;
/// Characters of numbered lines one `read` returns at most: about 22k
/// tokens, under the cap on every tool result ([`crate::MAX_RESULT_CHARS`]),
/// so that 2000 long lines cannot fill the context (Claude Code's Read
/// stops at 25k tokens). The result says where to continue.
pub const MAX_READ_CHARS: usize = 90_000;

/// Reads a file: numbered lines for text, an image part for images.
#[derive(Debug, Default)]
pub struct ReadTool;

#[async_trait]
impl Tool for ReadTool {
    fn name(&self) -> &str {
        "read"
    }

    fn description(&self) -> &str {
        "Reads a file as numbered lines (`cat -n`), or a PNG, JPEG, GIF or WebP image (up to 5 \
         MB); binary files are refused. Shows 2000 lines unless `limit` says otherwise, cuts \
         lines over 2000 characters, and says how many lines remain. A file unchanged since \
         you read it gets a short note pointing at the earlier result."
    }

    fn input_schema(&self) -> Value {
        schema_for::<ReadArgs>()
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args: ReadArgs = parse(input)?;
        let offset = args.offset.map_or(1, |n| n.0) as usize;
        let limit = args.limit.map_or(DEFAULT_READ_LINES as u64, AtLeastOne::get) as usize;
        let sandbox = Sandbox::from_context(ctx);
        let path = sandbox.resolve(&args.path)?;
        let shown = sandbox.display(&path);
        let (root, rel) = sandbox.beneath(&path)?;
        let name = shown.clone();
        let max = ctx.sandbox.max_file_bytes;
        let file =
            tokio::task::spawn_blocking(move || read_file(&root, &rel, &name, offset, limit, max))
                .await
                .map_err(|e| ToolError::Failed(format!("read task failed: {e}")))??;
        Ok(ctx.reads.answer(&path, &shown, file, &ctx.call_id))
    }
}

/// `read`'s input.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    /// Relative to the workspace, or absolute inside it.
    path: String,
    /// First line, 1-based (default 1).
    offset: Option<LineNumber>,
    /// Lines to show (default 2000).
    limit: Option<AtLeastOne>,
}

/// A 1-based line number: 0 is refused with a hint, not taken as the start.
#[derive(Clone, Copy)]
struct LineNumber(u64);

impl<'de> Deserialize<'de> for LineNumber {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        at_least_one(deserializer, "a 1-based line number: use 1 for the first line").map(Self)
    }
}

impl JsonSchema for LineNumber {
    fn schema_name() -> Cow<'static, str> {
        AtLeastOne::schema_name()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        AtLeastOne::json_schema(generator)
    }
    fn inline_schema() -> bool {
        true
    }
}

/// The blocking body of `read`: `path` is opened beneath `root` (never
/// through a link), and refused when over `max` bytes.
fn read_file(
    root: &Beneath,
    path: &Path,
    shown: &str,
    offset: usize,
    limit: usize,
    max: u64,
) -> Result<FileRead, ToolError> {
    let mut file = root.open_read(path)?;
    let meta = file.metadata().map_err(|e| ToolError::io(format!("cannot read {shown}"), e))?;
    if meta.is_dir() {
        return Err(ToolError::InvalidArguments(format!(
            "{shown} is a folder, not a file; use list_dir to see what it holds"
        )));
    }
    check_size(shown, meta.len(), max)?;
    let mut head = Vec::with_capacity(BINARY_SNIFF_BYTES);
    (&mut file)
        .take(BINARY_SNIFF_BYTES as u64)
        .read_to_end(&mut head)
        .map_err(|e| ToolError::io(format!("cannot read {shown}"), e))?;

    if let Some(media_type) = image_type(path, &head)? {
        return read_image(file, head, shown, media_type, meta.len());
    }
    if looks_binary(&head) {
        return Err(ToolError::Failed(format!(
            "{shown} looks like a binary file (it has a NUL byte in its first 8 KB); \
             read shows text files and images only"
        )));
    }
    let mut reader = BufReader::new(Hashing {
        inner: std::io::Cursor::new(head).chain(file.take(max)),
        sha256: Sha256::new(),
    });
    let (output, lines) = numbered_lines(&mut reader, shown, offset, limit)?;
    let sha256 = reader.into_inner().sha256.finalize().into();
    Ok(FileRead { output, sha256, lines })
}

/// A reader that hashes what passes through it (`numbered_lines` reads to
/// the end, so the whole file is hashed).
struct Hashing<R> {
    inner: R,
    sha256: Sha256,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.sha256.update(&buf[..n]);
        Ok(n)
    }
}

/// Streams lines `offset..offset+limit` of `reader` into `cat -n` text with a
/// trailer, counting (not keeping) the rest; also says which lines it showed.
fn numbered_lines(
    mut reader: impl BufRead,
    shown: &str,
    offset: usize,
    limit: usize,
) -> Result<(ToolOutput, Shown), ToolError> {
    let io = |e| ToolError::io(format!("cannot read {shown}"), e);
    let mut out = String::new();
    let mut buf = Vec::new();
    let mut number = 0usize;
    let mut lossy = false;
    let last_wanted = offset.saturating_add(limit - 1);
    let mut full = false;
    while number < last_wanted && !full {
        buf.clear();
        if reader.read_until(b'\n', &mut buf).map_err(io)? == 0 {
            break;
        }
        number += 1;
        if number < offset {
            continue;
        }
        let line = trim_newline(&buf);
        if line.contains(&0) {
            // Text that turns into binary past the first 8 KB: the lines
            // before it are shown, NUL bytes never reach the model (the
            // rest is read all the same: the whole file is hashed).
            count_lines(&mut reader).map_err(io)?;
            return binary_from(out, shown, offset, number);
        }
        let text = String::from_utf8_lossy(line);
        lossy |= matches!(text, Cow::Owned(_));
        push_numbered(&mut out, number, &text);
        full = out.len() >= MAX_READ_CHARS;
    }
    let remaining = count_lines(&mut reader).map_err(io)?;
    let total = number + remaining;
    if total == 0 {
        return Ok((ToolOutput::text(format!("({shown} is empty)")), Shown::Whole));
    }
    if offset > total {
        return Err(ToolError::InvalidArguments(format!(
            "offset {offset} is past the end of {shown}, which has {total} lines"
        )));
    }
    if lossy {
        out.push_str(
            "\n(Note: the file is not valid UTF-8; invalid bytes are shown as \u{FFFD}.)\n",
        );
    }
    if remaining > 0 && full {
        out.push_str(&format!(
            "\n(Showing lines {offset}-{number} of {total}: one read returns at most \
             {MAX_READ_CHARS} characters. {remaining} more lines; call read with offset={} \
             (and a smaller limit) to continue.)\n",
            number + 1
        ));
    } else if remaining > 0 {
        out.push_str(&format!(
            "\n(Showing lines {offset}-{number} of {total}. {remaining} more lines; \
             call read with offset={} to continue.)\n",
            number + 1
        ));
    }
    Ok((ToolOutput::text(out), Shown::Lines(offset, number)))
}

/// The lines shown so far (`out`), ended where line `number` turns binary.
fn binary_from(
    mut out: String,
    shown: &str,
    offset: usize,
    number: usize,
) -> Result<(ToolOutput, Shown), ToolError> {
    if number == offset {
        return Err(ToolError::Failed(format!(
            "{shown} has NUL bytes at line {number}: binary data, not text; read shows text \
             files and images only (look at it with bash: od -c, strings)"
        )));
    }
    out.push_str(&format!(
        "\n(Line {number} of {shown} has NUL bytes: binary data from there on, not shown. \
         Look at it with bash: od -c, strings.)\n"
    ));
    Ok((ToolOutput::text(out), Shown::Lines(offset, number - 1)))
}

/// Counts the lines left in `reader` without keeping them (a last line
/// without a newline counts).
fn count_lines(reader: &mut impl BufRead) -> std::io::Result<usize> {
    let mut count = 0;
    let mut ends_open = false;
    loop {
        let chunk = reader.fill_buf()?;
        if chunk.is_empty() {
            break;
        }
        count += chunk.iter().filter(|b| **b == b'\n').count();
        ends_open = chunk.last() != Some(&b'\n');
        let n = chunk.len();
        reader.consume(n);
    }
    Ok(count + usize::from(ends_open))
}

/// `line` without its trailing `\n` or `\r\n`.
fn trim_newline(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// The media type of an image we can show (PNG, JPEG, GIF, WebP), from the
/// file's first 12 bytes; `None` for anything else.
pub fn image_media_type(head: &[u8]) -> Option<&'static str> {
    if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if head.starts_with(b"\xff\xd8\xff") {
        Some("image/jpeg")
    } else if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if head.len() >= 12 && &head[..4] == b"RIFF" && &head[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// The media type when the file is an image we can show: decided by magic
/// bytes; an image extension on a file that is not that image is an error.
fn image_type(path: &Path, head: &[u8]) -> Result<Option<&'static str>, ToolError> {
    let by_magic = image_media_type(head);
    let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    let by_ext = match ext.as_deref() {
        Some("png") => Some("image/png"),
        Some("jpg" | "jpeg") => Some("image/jpeg"),
        Some("gif") => Some("image/gif"),
        Some("webp") => Some("image/webp"),
        _ => None,
    };
    match (by_ext, by_magic) {
        (Some(expected), found) if found != Some(expected) => Err(ToolError::Failed(format!(
            "{} has an image extension but its content is not {expected}{}",
            path.display(),
            found.map(|f| format!(" (it looks like {f})")).unwrap_or_default()
        ))),
        (_, found) => Ok(found),
    }
}

/// Returns the whole image, base64-encoded, if it is under the size cap.
fn read_image(
    mut file: File,
    mut bytes: Vec<u8>,
    shown: &str,
    media_type: &'static str,
    len: u64,
) -> Result<FileRead, ToolError> {
    if len > MAX_IMAGE_BYTES {
        return Err(ToolError::Failed(format!(
            "{shown} is a {:.1} MB image, over the {} MB limit for images",
            len as f64 / 1_048_576.0,
            MAX_IMAGE_BYTES / 1_048_576
        )));
    }
    (&mut file)
        .take(MAX_IMAGE_BYTES + 1 - bytes.len() as u64)
        .read_to_end(&mut bytes)
        .map_err(|e| ToolError::io(format!("cannot read {shown}"), e))?;
    if bytes.len() as u64 > MAX_IMAGE_BYTES {
        return Err(ToolError::Failed(format!(
            "{shown} grew past the {} MB image limit while being read",
            MAX_IMAGE_BYTES / 1_048_576
        )));
    }
    let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
    let output = ToolOutput {
        content: vec![
            ResultPart::Text { text: format!("{shown}: {media_type}, {} bytes", bytes.len()) },
            ResultPart::Image { media_type: media_type.to_string(), data },
        ],
        is_error: false,
    };
    Ok(FileRead { output, sha256: Sha256::digest(&bytes).into(), lines: Shown::Whole })
}
