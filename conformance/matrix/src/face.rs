//! A face process: one driver speaking `PROTOCOL.md` (a JSON request per line in, a JSON
//! response per line out, in order), spawned once per matrix run and fed in batches.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::thread;

use serde_json::{Map, Value};

/// A running face driver.
pub struct Face {
    /// The face's name (`rust`, `python`, ...).
    pub name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

/// The canonical text of a JSON value: object keys sorted at every level, so two faces that
/// print the same value in different key orders compare equal, and nothing else does.
pub fn canonical(v: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(o) => {
                let mut keys: Vec<&String> = o.keys().collect();
                keys.sort();
                Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sorted(&o[k])))
                        .collect::<Map<_, _>>(),
                )
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(v).to_string()
}

impl Face {
    /// Starts `argv` (the face's `run.sh`, or this binary's `face` subcommand).
    pub fn spawn(name: &str, argv: &[String]) -> Result<Face, String> {
        let (prog, args) = argv.split_first().ok_or("empty face command")?;
        let mut child = Command::new(prog)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("{name}: cannot start {argv:?}: {e}"))?;
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        Ok(Face {
            name: name.to_string(),
            child,
            stdin,
            stdout,
            next_id: 1,
        })
    }

    /// Sends every request (an `"id"` is added) and returns each response without its `id`:
    /// `{"ok": ...}`, `{"error": NAME}` or `{"fail": ...}`. A writer thread feeds stdin while
    /// this thread reads, so neither pipe can fill up and deadlock.
    pub fn batch(&mut self, requests: Vec<Value>) -> Result<Vec<Value>, String> {
        let first = self.next_id;
        let n = requests.len() as u64;
        self.next_id += n;
        let mut stdin = self.stdin.take().ok_or("face stdin closed")?;
        let name = self.name.clone();
        let writer = thread::spawn(move || -> Result<ChildStdin, String> {
            let mut buf = Vec::with_capacity(1 << 16);
            for (i, mut r) in requests.into_iter().enumerate() {
                r["id"] = Value::from(first + i as u64);
                serde_json::to_writer(&mut buf, &r).expect("a JSON value serialises");
                buf.push(b'\n');
                if buf.len() > 1 << 15 {
                    stdin
                        .write_all(&buf)
                        .map_err(|e| format!("{name}: write: {e}"))?;
                    buf.clear();
                }
            }
            stdin
                .write_all(&buf)
                .and_then(|_| stdin.flush())
                .map_err(|e| format!("{name}: write: {e}"))?;
            Ok(stdin)
        });
        let mut out = Vec::with_capacity(n as usize);
        let mut line = String::new();
        for i in 0..n {
            line.clear();
            let read = self
                .stdout
                .read_line(&mut line)
                .map_err(|e| format!("{}: read: {e}", self.name))?;
            if read == 0 {
                return Err(format!(
                    "{}: the driver closed its output after {i} of {n} responses",
                    self.name
                ));
            }
            let mut v: Value = serde_json::from_str(&line).map_err(|e| {
                format!("{}: response is not JSON ({e}): {}", self.name, line.trim())
            })?;
            let id = v
                .as_object_mut()
                .and_then(|o| o.remove("id"))
                .and_then(|id| id.as_u64());
            if id != Some(first + i) {
                return Err(format!(
                    "{}: response {} carries id {id:?}: {}",
                    self.name,
                    first + i,
                    line.trim()
                ));
            }
            out.push(v);
        }
        self.stdin = Some(writer.join().map_err(|_| "writer thread panicked")??);
        Ok(out)
    }

    /// The driver's process id (its `run.sh` execs the driver, so this is the driver).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Closes stdin and waits for the driver to exit 0.
    pub fn close(mut self) -> Result<(), String> {
        drop(self.stdin.take());
        let status = self
            .child
            .wait()
            .map_err(|e| format!("{}: wait: {e}", self.name))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("{}: driver exited with {status}", self.name))
        }
    }
}

impl Drop for Face {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
