//! The control socket: the daemon's side ([`CtlServer`]) and the client
//! side ([`request`]) of the JSON-line protocol in [`control`](crate::control).
//!
//! The socket is a Unix stream socket, root-only (mode 0600, in a 0700
//! directory when the server creates it). Each connection carries any
//! number of requests, one JSON object per line, each answered by one JSON
//! line; a line that does not parse gets `{"error":"bad request: ..."}`
//! and the connection stays usable. Lines are capped at [`MAX_LINE`]
//! bytes, connections at [`MAX_CONNECTIONS`] at once (one thread each);
//! past either the peer gets an error naming the limit.
//!
//! Binding replaces a stale socket file (one nothing answers on) and
//! refuses a live one: two daemons never share a socket path.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{bail, Context};

use crate::control::{parse_request, Request, Response};

/// Where eswitchd listens unless told otherwise.
pub const DEFAULT_SOCKET: &str = "/run/eswitch/eswitchd.sock";

/// The environment variable that names the socket for eswitchctl.
pub const SOCKET_ENV: &str = "ESWITCH_SOCKET";

/// Longest request line the server reads (bytes, without the newline).
pub const MAX_LINE: usize = 1 << 20;

/// Connections served at once; more are answered with an error and closed.
pub const MAX_CONNECTIONS: usize = 16;

/// Longest response line the client reads.
const MAX_RESPONSE: u64 = 1 << 30;

/// A connection idle this long is closed.
const IDLE: Duration = Duration::from_secs(600);

/// A bound control socket, not yet serving.
#[derive(Debug)]
pub struct CtlServer {
    listener: UnixListener,
    path: PathBuf,
    /// Device and inode of the socket file, so only ours is removed.
    id: (u64, u64),
}

/// A serving control socket. [`stop`](CtlHandle::stop) (or drop) stops
/// accepting, closes the connections and removes the socket file.
#[derive(Debug)]
pub struct CtlHandle {
    path: PathBuf,
    id: (u64, u64),
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// eswitchctl could not reach the daemon (no socket, nobody listening,
/// no permission).
#[derive(Debug)]
pub struct ConnectError {
    pub path: PathBuf,
    pub source: io::Error,
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cannot connect to eswitchd at {}: {} (is eswitchd running? --socket / {SOCKET_ENV})",
            self.path.display(),
            self.source
        )
    }
}

/// The io error is part of the message (not a separate source), so a
/// chain printed with `{:#}` does not repeat it.
impl std::error::Error for ConnectError {}

fn file_id(path: &Path) -> Option<(u64, u64)> {
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

impl CtlServer {
    /// Binds the socket at `path`: creates its directory (0700) if missing,
    /// replaces a stale socket file, refuses one a live daemon answers on,
    /// and makes the socket root-only (0600).
    pub fn bind(path: &Path) -> anyhow::Result<CtlServer> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.exists() {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
            }
        }
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_socket() => match UnixStream::connect(path) {
                Ok(_) => bail!("another eswitchd is listening on {}", path.display()),
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    std::fs::remove_file(path).with_context(|| {
                        format!("cannot remove the stale socket {}", path.display())
                    })?;
                }
                Err(e) => bail!("cannot check the socket {}: {e}", path.display()),
            },
            Ok(_) => bail!(
                "{} exists and is not a socket; not replacing it",
                path.display()
            ),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => bail!("cannot check {}: {e}", path.display()),
        }
        let listener = UnixListener::bind(path)
            .with_context(|| format!("cannot bind the control socket {}", path.display()))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("cannot make {} root-only", path.display()))?;
        let id = file_id(path).unwrap_or_default();
        Ok(CtlServer {
            listener,
            path: path.to_path_buf(),
            id,
        })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Serves requests with `handler` on an accept thread, one thread per
    /// connection.
    pub fn serve<F>(self, handler: F) -> CtlHandle
    where
        F: Fn(Request) -> Response + Send + Sync + 'static,
    {
        let stop = Arc::new(AtomicBool::new(false));
        let handler = Arc::new(handler);
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("eswitchd-ctl".into())
                .spawn(move || accept_loop(self.listener, &stop, handler))
                .ok()
        };
        CtlHandle {
            path: self.path,
            id: self.id,
            stop,
            thread,
        }
    }
}

/// Counts a connection in while it lives.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn accept_loop<F>(listener: UnixListener, stop: &AtomicBool, handler: Arc<F>)
where
    F: Fn(Request) -> Response + Send + Sync + 'static,
{
    let active = Arc::new(AtomicUsize::new(0));
    // Each connection's thread, and its stream to shut down on stop.
    let mut conns: Vec<(JoinHandle<()>, Option<UnixStream>)> = Vec::new();
    loop {
        let accepted = listener.accept();
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let mut stream = match accepted {
            Ok((s, _)) => s,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => {
                // Out of descriptors and the like: back off, go on.
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        conns.retain(|(t, _)| !t.is_finished());
        if active.load(Ordering::SeqCst) >= MAX_CONNECTIONS {
            let resp = Response::Error(format!(
                "too many control connections (limit {MAX_CONNECTIONS})"
            ));
            let _ = write_response(&mut stream, &resp);
            continue;
        }
        active.fetch_add(1, Ordering::SeqCst);
        let slot = Slot(Arc::clone(&active));
        let peer = stream.try_clone().ok();
        let handler = Arc::clone(&handler);
        let spawned = std::thread::Builder::new()
            .name("eswitchd-ctl-conn".into())
            .spawn(move || {
                let _slot = slot;
                let _ = serve_connection(stream, &*handler);
            });
        if let Ok(t) = spawned {
            conns.push((t, peer));
        }
    }
    for (_, s) in &conns {
        if let Some(s) = s {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
    for (t, _) in conns {
        let _ = t.join();
    }
}

fn write_response(w: &mut impl Write, resp: &Response) -> io::Result<()> {
    let mut line = serde_json::to_string(resp)
        .unwrap_or_else(|e| format!("{{\"error\":\"cannot encode the response: {e}\"}}"));
    line.push('\n');
    w.write_all(line.as_bytes())?;
    w.flush()
}

/// What [`read_line`] read.
enum Line {
    Eof,
    Text(Vec<u8>),
    TooLong,
}

/// One line of at most `max` bytes (without its newline); a longer one is
/// read to its end and dropped.
fn read_line(r: &mut impl BufRead, max: usize) -> io::Result<Line> {
    let mut buf = Vec::new();
    let n = r
        .by_ref()
        .take(max as u64 + 1)
        .read_until(b'\n', &mut buf)?;
    if n == 0 {
        return Ok(Line::Eof);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
        return Ok(Line::Text(buf));
    }
    if buf.len() <= max {
        // The last line, without a newline.
        return Ok(Line::Text(buf));
    }
    // Too long: skip to the end of the line.
    loop {
        let (done, used) = {
            let avail = r.fill_buf()?;
            if avail.is_empty() {
                (true, 0)
            } else {
                match avail.iter().position(|&b| b == b'\n') {
                    Some(i) => (true, i + 1),
                    None => (false, avail.len()),
                }
            }
        };
        r.consume(used);
        if done {
            return Ok(Line::TooLong);
        }
    }
}

fn serve_connection<F>(stream: UnixStream, handler: &F) -> io::Result<()>
where
    F: Fn(Request) -> Response + ?Sized,
{
    stream.set_read_timeout(Some(IDLE))?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    loop {
        let resp = match read_line(&mut reader, MAX_LINE)? {
            Line::Eof => return Ok(()),
            Line::TooLong => Response::Error(format!(
                "bad request: line longer than {MAX_LINE} bytes (the limit)"
            )),
            Line::Text(bytes) => {
                let Ok(text) = std::str::from_utf8(&bytes) else {
                    write_response(
                        &mut writer,
                        &Response::Error("bad request: not UTF-8".into()),
                    )?;
                    continue;
                };
                if text.trim().is_empty() {
                    continue;
                }
                match parse_request(text) {
                    Err(e) => Response::Error(e),
                    Ok(req) => {
                        let run = std::panic::AssertUnwindSafe(|| handler(req));
                        std::panic::catch_unwind(run).unwrap_or_else(|_| {
                            Response::Error("internal error: the request handler panicked".into())
                        })
                    }
                }
            }
        };
        write_response(&mut writer, &resp)?;
    }
}

impl CtlHandle {
    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops accepting, closes open connections, waits for the threads and
    /// removes the socket file.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept thread; if that fails it cannot be woken, so it
        // is left behind rather than waited for.
        let woke = UnixStream::connect(&self.path).is_ok();
        if woke {
            let _ = thread.join();
        }
        if file_id(&self.path) == Some(self.id) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl Drop for CtlHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Sends one request to the daemon at `path` and reads its response, each
/// way within `timeout`. A daemon that cannot be reached gives a
/// [`ConnectError`] (with the hint about `--socket`).
pub fn request(path: &Path, req: &Request, timeout: Duration) -> anyhow::Result<Response> {
    let mut stream = UnixStream::connect(path).map_err(|source| ConnectError {
        path: path.to_path_buf(),
        source,
    })?;
    let timeout = Some(timeout).filter(|t| !t.is_zero());
    stream.set_read_timeout(timeout)?;
    stream.set_write_timeout(timeout)?;
    let mut line = serde_json::to_string(req)?;
    line.push('\n');
    stream
        .write_all(line.as_bytes())
        .with_context(|| format!("sending to eswitchd at {}", path.display()))?;
    let mut reader = BufReader::new(stream.take(MAX_RESPONSE));
    let mut resp = String::new();
    let n = reader
        .read_line(&mut resp)
        .with_context(|| format!("reading from eswitchd at {}", path.display()))?;
    if n == 0 {
        bail!("eswitchd at {} closed the connection", path.display());
    }
    serde_json::from_str(resp.trim_end())
        .with_context(|| format!("bad response from eswitchd at {}", path.display()))
}

#[cfg(test)]
#[path = "tests/socket.rs"]
mod tests;
