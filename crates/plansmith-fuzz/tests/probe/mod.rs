//! A fuzz target for testing the harness: records its inputs, spins or sleeps on demand.

pub struct Probe {
    pub seen: Vec<Vec<u8>>,
    spin_ms: u64,
    sleep_ms: u64,
}

impl plansmith_fuzz::Target for Probe {
    fn name(&self) -> &'static str {
        "probe"
    }
    fn input(&mut self, rng: &mut plansmith_fuzz::Rng) -> Vec<u8> {
        rng.below(1 << 30).to_le_bytes().to_vec()
    }
    fn check(&mut self, input: &[u8]) -> Result<plansmith_fuzz::Verdict, String> {
        self.seen.push(input.to_vec());
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed() < std::time::Duration::from_millis(self.spin_ms) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        std::thread::sleep(std::time::Duration::from_millis(self.sleep_ms));
        Ok(plansmith_fuzz::Verdict::Accepted)
    }
    fn budget(&self) -> std::time::Duration {
        std::time::Duration::from_millis(5)
    }
}

pub fn probe(spin_ms: u64, sleep_ms: u64) -> Probe {
    Probe {
        seen: Vec::new(),
        spin_ms,
        sleep_ms,
    }
}
