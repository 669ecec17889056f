//! Training traces: JSONL, one `{"request", "calls", "tools"?, "source"}` per line.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::plan::{Call, Plan};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TraceSource {
    Teacher,
    Harvest,
    #[default]
    Synthetic,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    pub request: String,
    /// Empty means "no call" is the right answer.
    pub calls: Vec<Call>,
    /// The catalog the request was planned against (any importable form), or a file name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Value>,
    #[serde(default)]
    pub source: TraceSource,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spoken_text: Option<String>,
}

impl Trace {
    pub fn plan(&self) -> Plan {
        Plan {
            calls: self.calls.clone(),
            spoken_text: self.spoken_text.clone(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The I/O error is part of the message, not a `source`: printed as a chain (`{:#}`) it
    /// would otherwise appear twice.
    #[error("cannot access {path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{path}:{line}: {message}")]
    Line {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

/// Read every trace; the first malformed line is an error naming file and line.
pub fn read_traces(path: impl AsRef<Path>) -> Result<Vec<Trace>, TraceError> {
    let (traces, mut bad) = read_traces_lenient(path)?;
    match bad.is_empty() {
        true => Ok(traces),
        false => Err(bad.remove(0)),
    }
}

/// Read the good lines and report the bad ones (blank lines are skipped silently).
pub fn read_traces_lenient(
    path: impl AsRef<Path>,
) -> Result<(Vec<Trace>, Vec<TraceError>), TraceError> {
    let (mut traces, mut bad) = (Vec::new(), Vec::new());
    for item in stream_traces(path)? {
        match item {
            Ok(t) => traces.push(t),
            Err(e @ TraceError::Line { .. }) => bad.push(e),
            Err(e) => return Err(e),
        }
    }
    Ok((traces, bad))
}

/// The traces of a JSONL file one at a time, for files too large to hold parsed: a trace
/// with its own catalog is ~26 KB as a JSON tree. Blank lines are skipped; a bad line is an
/// `Err(TraceError::Line)` and reading goes on; a read failure is an `Err(TraceError::Io)`.
pub fn stream_traces(
    path: impl AsRef<Path>,
) -> Result<impl Iterator<Item = Result<Trace, TraceError>>, TraceError> {
    let path = path.as_ref().to_path_buf();
    let file = File::open(&path).map_err(|error| TraceError::Io {
        path: path.clone(),
        error,
    })?;
    Ok(BufReader::new(file)
        .lines()
        .enumerate()
        .filter_map(move |(i, line)| match line {
            Err(error) => Some(Err(TraceError::Io {
                path: path.clone(),
                error,
            })),
            Ok(line) if line.trim().is_empty() => None,
            Ok(line) => Some(
                serde_json::from_str::<Trace>(&line).map_err(|e| TraceError::Line {
                    path: path.clone(),
                    line: i + 1,
                    message: e.to_string(),
                }),
            ),
        }))
}

/// Appends traces durably: each `append` returns only after the line is on disk.
pub struct TraceWriter {
    file: File,
    path: PathBuf,
}

impl TraceWriter {
    pub fn open(path: impl AsRef<Path>) -> Result<TraceWriter, TraceError> {
        let path = path.as_ref().to_path_buf();
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|error| TraceError::Io {
                path: path.clone(),
                error,
            })?;
        Ok(TraceWriter { file, path })
    }

    pub fn append(&mut self, trace: &Trace) -> Result<(), TraceError> {
        let mut line = serde_json::to_string(trace).map_err(|e| TraceError::Line {
            path: self.path.clone(),
            line: 0,
            message: e.to_string(),
        })?;
        line.push('\n');
        let io = |error| TraceError::Io {
            path: self.path.clone(),
            error,
        };
        let end = self.file.metadata().map_err(io)?.len();
        // One write call per line keeps concurrent appenders from interleaving within a line.
        let written = self
            .file
            .write_all(line.as_bytes())
            .and_then(|_| self.file.sync_data());
        if let Err(e) = written {
            // A full disk can take part of the line: cut it off again, so the file never ends
            // in a torn trace and the next append starts on a line of its own.
            let _ = self.file.set_len(end);
            return Err(io(e));
        }
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Write a whole file atomically: temp file in the same directory, fsync, rename, fsync dir.
pub fn write_atomic(path: impl AsRef<Path>, bytes: &[u8]) -> std::io::Result<()> {
    let path = path.as_ref();
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_and_read_back_with_line_errors() {
        let dir = std::env::temp_dir().join(format!("plansmith-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.jsonl");
        let _ = std::fs::remove_file(&path);
        let mut w = TraceWriter::open(&path).unwrap();
        let t = Trace {
            request: "open safari".into(),
            calls: vec![Call::new(
                "open",
                serde_json::from_str(r#"{"target":{"type":"app","label":"safari"}}"#).unwrap(),
            )],
            tools: None,
            source: TraceSource::Harvest,
            spoken_text: None,
        };
        w.append(&t).unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{broken\n")
            .unwrap();
        w.append(&t).unwrap();
        let (good, bad) = read_traces_lenient(&path).unwrap();
        assert_eq!(good, vec![t.clone(), t]);
        assert_eq!(bad.len(), 1);
        assert!(bad[0].to_string().contains("t.jsonl:2:"), "{}", bad[0]);
        assert!(read_traces(&path).is_err());
    }
}
