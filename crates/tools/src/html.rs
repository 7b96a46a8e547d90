//! HTML pages as Markdown or plain text for the model (via `htmd`), without
//! the parts that are not content: scripts, styles, navigation, forms.

use htmd::element_handler::{HandlerResult, Handlers};
use htmd::{Element, HtmlToMarkdown};

/// Elements dropped with everything inside them.
const DROPPED_TAGS: &[&str] = &[
    "script", "style", "noscript", "nav", "iframe", "svg", "canvas", "form", "button", "template",
    "head",
];

/// The page as Markdown, preceded by its title.
pub(crate) fn html_to_markdown(html: &str) -> String {
    convert(html, HtmlToMarkdown::builder().skip_tags(DROPPED_TAGS.to_vec()).build())
}

/// The page as plain text: Markdown without link targets, images or emphasis marks.
pub(crate) fn html_to_text(html: &str) -> String {
    let inner = |handlers: &dyn Handlers, element: Element| -> Option<HandlerResult> {
        Some(handlers.walk_children(element.node).content.into())
    };
    let alt = |_: &dyn Handlers, element: Element| -> Option<HandlerResult> {
        element.attrs.iter().find(|a| &*a.name.local == "alt").map(|a| a.value.to_string().into())
    };
    let converter = HtmlToMarkdown::builder()
        .skip_tags(DROPPED_TAGS.to_vec())
        .add_handler(vec!["a", "strong", "b", "em", "i", "code", "span"], inner)
        .add_handler(vec!["img"], alt)
        .build();
    convert(html, converter)
}

fn convert(html: &str, converter: HtmlToMarkdown) -> String {
    let title = title(html);
    let body = main_element(html).unwrap_or(html);
    let text = converter.convert(body).unwrap_or_else(|_| strip_tags(body));
    match title {
        Some(title) if !title.is_empty() => format!("Title: {title}\n\n{text}"),
        _ => text,
    }
}

/// The text of the `<title>` element, if any.
fn title(html: &str) -> Option<String> {
    let lower = html.to_ascii_lowercase();
    let open = lower.find("<title")?;
    let start = open + lower[open..].find('>')? + 1;
    let end = start + lower[start..].find("</title>")?;
    Some(html[start..end].split_whitespace().collect::<Vec<_>>().join(" "))
}

/// The `<main>` element when the page has exactly one: the content without
/// headers, sidebars and footers.
fn main_element(html: &str) -> Option<&str> {
    let lower = html.to_ascii_lowercase();
    let start = find_tag(&lower, "<main")?;
    if find_tag(&lower[start + 5..], "<main").is_some() {
        return None;
    }
    let end = lower.rfind("</main>")? + "</main>".len();
    (end > start).then(|| &html[start..end])
}

/// Position of tag `open` (e.g. `<main`) followed by `>` or whitespace.
fn find_tag(lower: &str, open: &str) -> Option<usize> {
    lower.match_indices(open).map(|(i, _)| i).find(|&i| {
        lower[i + open.len()..].chars().next().is_some_and(|c| c == '>' || c.is_whitespace())
    })
}

/// Last resort when the parser fails: the text between tags.
fn strip_tags(html: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = "<html><head><title>My  Page</title><style>p{}</style></head><body>\
        <nav><a href='/'>Home</a></nav><main><h1>Hello</h1><p>Some <b>bold</b> \
        <a href='https://x.y/z'>link</a>.</p><script>alert(1)</script></main>\
        <footer>foot</footer></body></html>";

    #[test]
    fn markdown_keeps_content_and_drops_scripts_and_navigation() {
        let md = html_to_markdown(PAGE);
        assert!(md.starts_with("Title: My Page"), "{md}");
        assert!(md.contains("# Hello"), "{md}");
        assert!(md.contains("[link](https://x.y/z)"), "{md}");
        assert!(!md.contains("alert"), "{md}");
        assert!(!md.contains("Home"), "{md}");
        assert!(!md.contains("foot"), "main element only: {md}");
    }

    #[test]
    fn text_drops_link_targets_and_emphasis() {
        let text = html_to_text(PAGE);
        assert!(text.contains("Some bold link."), "{text}");
        assert!(!text.contains("https://x.y/z"), "{text}");
    }

    #[test]
    fn pages_without_main_are_converted_whole() {
        let md = html_to_markdown("<body><p>one</p><p>two</p></body>");
        assert!(md.contains("one") && md.contains("two"), "{md}");
    }
}
