#[test]
fn timing() {
    for _ in 0..3 {
        let t = std::time::Instant::now();
        let p = ferroclaw_llm::connect(ferroclaw_llm::ProviderConfig::new("a", ferroclaw_llm::WireFormat::Anthropic, "https://x"));
        eprintln!("connect: {:?} {}", t.elapsed(), p.name());
    }
}
