fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(6000);
    let t = std::time::Instant::now();
    let d = plansmith_data::generate_pace(&plansmith_data::PaceConfig::with_n(n)).unwrap();
    eprintln!("{:?}", t.elapsed());
    println!("{}", serde_json::to_string_pretty(&d.stats).unwrap());
    for t in d.train.iter().take(60) {
        println!(
            "{}  =>  {}",
            t.request,
            plansmith_core::Syntax::Dsl.render(&t.plan()).trim_end()
        );
    }
}
