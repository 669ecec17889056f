//! Atomic file writes: write a temp file in the same directory, fsync it, rename it over the
//! target, fsync the directory. A crash at any point leaves either the old or the new file.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{LmError, Result};

static COUNTER: AtomicU64 = AtomicU64::new(0);

fn temp_path_for(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".into());
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    path.with_file_name(format!(".{name}.tmp-{}-{n}", std::process::id()))
}

/// Fsync a directory so a rename inside it is durable.
pub fn fsync_dir(dir: &Path) -> Result<()> {
    let d = File::open(dir).map_err(|e| LmError::io(dir, e))?;
    d.sync_all().map_err(|e| LmError::io(dir, e))
}

/// Atomically replace `path` with what `write` puts into the temp path it is given.
pub fn atomic_write_with<F>(path: &Path, write: F) -> Result<()>
where
    F: FnOnce(&Path) -> Result<()>,
{
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&dir).map_err(|e| LmError::io(&dir, e))?;
    let tmp = temp_path_for(path);
    let result = (|| {
        write(&tmp)?;
        let f = File::open(&tmp).map_err(|e| LmError::io(&tmp, e))?;
        f.sync_all().map_err(|e| LmError::io(&tmp, e))?;
        fs::rename(&tmp, path).map_err(|e| LmError::io(path, e))?;
        fsync_dir(&dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Atomically replace `path` with `bytes`.
pub fn atomic_write_bytes(path: &Path, bytes: &[u8]) -> Result<()> {
    atomic_write_with(path, |tmp| {
        let mut f = File::create(tmp).map_err(|e| LmError::io(tmp, e))?;
        f.write_all(bytes).map_err(|e| LmError::io(tmp, e))
    })
}

/// Atomically write a value as pretty JSON.
pub fn atomic_write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<()> {
    let text = serde_json::to_vec_pretty(value).map_err(|e| LmError::json(path, e))?;
    atomic_write_bytes(path, &text)
}

/// Read and parse a JSON file, naming the file on error.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let text = fs::read(path).map_err(|e| LmError::io(path, e))?;
    serde_json::from_slice(&text).map_err(|e| LmError::json(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp() {
        let dir = std::env::temp_dir().join(format!("plansmith-lm-io-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let p = dir.join("a.json");
        atomic_write_json(&p, &vec![1, 2]).unwrap();
        atomic_write_json(&p, &vec![3]).unwrap();
        let v: Vec<i32> = read_json(&p).unwrap();
        assert_eq!(v, vec![3]);
        let n = fs::read_dir(&dir).unwrap().count();
        assert_eq!(n, 1);
        // a failing writer leaves the previous file intact
        let r = atomic_write_with(&p, |_| Err(LmError::Data("boom".into())));
        assert!(r.is_err());
        let v: Vec<i32> = read_json(&p).unwrap();
        assert_eq!(v, vec![3]);
        fs::remove_dir_all(&dir).unwrap();
    }
}
