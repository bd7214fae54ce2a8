//! A `redis-server` process on a free loopback port for the Redis journal's tests, the crash
//! loop and the settlement benchmark: started with its data in a given directory (with AOF and
//! `appendfsync always`, what the journal's default durability asks for, or Redis's own
//! defaults), SIGKILLed on drop, and restartable on the same port and data. Needs Debian's
//! `redis-server` on PATH (scripts/test-all.sh installs it).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One `redis-server` process.
pub struct RedisServer {
    child: Child,
    port: u16,
    dir: PathBuf,
    aof: bool,
}

/// A port free on loopback now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

impl RedisServer {
    /// Starts one on a free port, its data in `dir`: with `aof`, `appendonly yes` and
    /// `appendfsync always`; without, Redis's defaults (no AOF). RDB snapshots are off either
    /// way. Returns once it answers PING (its AOF loaded).
    pub fn start(dir: &Path, aof: bool) -> Result<RedisServer, String> {
        RedisServer::start_on(free_port(), dir, aof)
    }

    /// As [`RedisServer::start`], on `port`.
    pub fn start_on(port: u16, dir: &Path, aof: bool) -> Result<RedisServer, String> {
        let mut cmd = Command::new("redis-server");
        cmd.args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .arg("--dir")
        .arg(dir)
        .args(["--daemonize", "no", "--protected-mode", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        if aof {
            cmd.args(["--appendonly", "yes", "--appendfsync", "always"]);
        }
        let child = cmd.spawn().map_err(|e| {
            format!(
                "cannot start redis-server ({e}): install it (apt-get install redis-server; \
                 scripts/test-all.sh does)"
            )
        })?;
        let mut r = RedisServer {
            child,
            port,
            dir: dir.to_path_buf(),
            aof,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !r.answers() {
            if Instant::now() > deadline || r.child.try_wait().ok().flatten().is_some() {
                return Err(format!("redis-server on port {port} did not come up"));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(r)
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:<port>/0`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Whether it answers PING now (it answers `-LOADING` while it reads its AOF).
    pub fn answers(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
        let mut buf = [0u8; 7];
        s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
    }

    /// Sends `commands` (RESP) in order on one connection (so a `SELECT` applies to those
    /// after it) and returns the first line of each reply (`+OK`, `:3`, ...); an error reply
    /// (`-ERR ...`) is an error.
    pub fn commands(&self, commands: &[&[&str]]) -> Result<Vec<String>, String> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).map_err(|e| e.to_string())?;
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
        let mut out = Vec::new();
        for args in commands {
            let mut req = format!("*{}\r\n", args.len());
            for a in *args {
                req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
            }
            s.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
            let mut reply = Vec::new();
            let mut byte = [0u8; 1];
            while !reply.ends_with(b"\r\n") {
                s.read_exact(&mut byte).map_err(|e| e.to_string())?;
                reply.push(byte[0]);
            }
            let line = String::from_utf8_lossy(&reply[..reply.len() - 2]).into_owned();
            if line.starts_with('-') {
                return Err(line);
            }
            out.push(line);
        }
        Ok(out)
    }

    /// SIGKILL: only what it had made durable before answering survives.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Kills it (if running) and starts it again on the same port and data.
    pub fn restart(&mut self) -> Result<(), String> {
        self.kill();
        let again = RedisServer::start_on(self.port, &self.dir.clone(), self.aof)?;
        *self = again;
        Ok(())
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}
