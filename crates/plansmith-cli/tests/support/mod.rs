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

/// Read one HTTP/1.1 request (its headers, then a body of `Content-Length` bytes) from a
/// test stub's connection; the request itself is not needed by the stubs.
pub fn read_request(stream: &std::net::TcpStream) {
    use std::io::Read;
    let mut reader = BufReader::new(stream.try_clone().expect("clone the stream"));
    let mut len = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().unwrap_or(0);
        }
    }
    let mut sink = vec![0u8; len];
    let _ = reader.read_exact(&mut sink);
}

/// Answer a test stub's connection with a JSON body and close it.
pub fn write_json(mut stream: std::net::TcpStream, status: &str, body: &str) {
    use std::io::Write;
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// Run the built `plansmith` with `args` from the repository root.
pub fn plansmith(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_plansmith"))
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .output()
        .expect("run plansmith")
}

/// A process's output as text.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}
