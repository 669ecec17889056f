//! What the CLI's end-to-end tests share: a child process killed when the test ends, and a
//! `plansmith serve` started on a free port with its address read from the banner it prints.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// Kills the child process when the test ends, passed or not.
pub struct Process(pub Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A running `plansmith serve`.
pub struct Served {
    /// `http://127.0.0.1:PORT`
    pub url: String,
    /// The first line it printed (`plansmith serving MODEL on URL (N workers)`).
    pub banner: String,
    pub process: Process,
}

impl Served {
    pub fn pid(&self) -> u32 {
        self.process.0.id()
    }
}

/// Start `cmd` (a `plansmith serve ... --addr 127.0.0.1:0` command line, configured as the test
/// needs) and wait for the address it prints.
pub fn serve(mut cmd: Command) -> Served {
    let mut child = cmd
        .stdout(Stdio::piped())
        .spawn()
        .expect("start plansmith serve");
    let stdout = child.stdout.take().expect("piped stdout");
    let process = Process(child);
    let mut banner = String::new();
    BufReader::new(stdout)
        .read_line(&mut banner)
        .expect("read the listen line");
    let url = banner
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("plansmith serve did not print its address: {banner:?}"))
        .to_string();
    Served {
        url,
        banner,
        process,
    }
}
