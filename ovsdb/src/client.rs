//! One JSON-RPC connection to an OVSDB server.

use std::collections::HashMap;
use std::io::{BufReader, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{json, Value};

use crate::replica::TableUpdates;
use crate::Error;

/// How long a call waits for its reply.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// What the server says without being asked.
#[derive(Clone, Debug, PartialEq)]
pub enum Notification {
    /// Changes to the tables a monitor follows (`monitor` is its id).
    Update {
        monitor: Value,
        updates: TableUpdates,
    },
    /// A lock asked for earlier is now held.
    Locked(String),
    /// A lock held was stolen by another client.
    Stolen(String),
}

enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Stream {
    fn connect(target: &str) -> Result<Stream, Error> {
        let fail = |source| Error::Connect {
            target: target.to_string(),
            source,
        };
        if let Some(path) = target.strip_prefix("unix:") {
            UnixStream::connect(path).map(Stream::Unix).map_err(fail)
        } else if let Some(addr) = target.strip_prefix("tcp:") {
            TcpStream::connect(addr).map(Stream::Tcp).map_err(fail)
        } else {
            Err(Error::Target(target.to_string()))
        }
    }

    fn try_clone(&self) -> std::io::Result<Stream> {
        Ok(match self {
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
        })
    }

    fn shutdown(&self) {
        let _ = match self {
            Stream::Unix(s) => s.shutdown(Shutdown::Both),
            Stream::Tcp(s) => s.shutdown(Shutdown::Both),
        };
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(buf),
            Stream::Tcp(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Unix(s) => s.flush(),
            Stream::Tcp(s) => s.flush(),
        }
    }
}

type Waiting = Arc<Mutex<HashMap<u64, Sender<Result<Value, Error>>>>>;

/// A connection to an OVSDB server. Dropping it closes the connection
/// (the server releases its locks and monitors).
pub struct Client {
    target: String,
    writer: Arc<Mutex<Stream>>,
    waiting: Waiting,
    /// Why the reader stopped, once it has.
    closed: Arc<Mutex<Option<String>>>,
    notes: Mutex<Receiver<Notification>>,
    next_id: AtomicU64,
    reader: Option<JoinHandle<()>>,
    timeout: Duration,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Client({})", self.target)
    }
}

impl Client {
    /// Connects to `target` (`unix:PATH` or `tcp:IP:PORT`).
    pub fn connect(target: &str) -> Result<Client, Error> {
        let stream = Stream::connect(target)?;
        let read = stream.try_clone()?;
        let writer = Arc::new(Mutex::new(stream));
        let waiting: Waiting = Arc::default();
        let closed: Arc<Mutex<Option<String>>> = Arc::default();
        let (tx, notes) = mpsc::channel();
        let reader = {
            let (writer, waiting, closed) = (
                Arc::clone(&writer),
                Arc::clone(&waiting),
                Arc::clone(&closed),
            );
            std::thread::Builder::new()
                .name("ovsdb-reader".into())
                .spawn(move || read_loop(read, &writer, &waiting, &closed, &tx))?
        };
        Ok(Client {
            target: target.to_string(),
            writer,
            waiting,
            closed,
            notes: Mutex::new(notes),
            next_id: AtomicU64::new(1),
            reader: Some(reader),
            timeout: DEFAULT_TIMEOUT,
        })
    }

    /// How long calls wait for their replies from now on.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    pub fn target(&self) -> &str {
        &self.target
    }

    /// Why the connection is closed, if it is.
    pub fn closed(&self) -> Option<String> {
        lock(&self.closed).clone()
    }

    /// Calls `method` with `params`; its `result`, or the server's error.
    pub fn call(&self, method: &str, params: Value) -> Result<Value, Error> {
        if let Some(why) = self.closed() {
            return Err(Error::Closed(why));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        lock(&self.waiting).insert(id, tx);
        let msg = json!({"method": method, "params": params, "id": id});
        if let Err(e) = send(&self.writer, &msg) {
            lock(&self.waiting).remove(&id);
            return Err(e);
        }
        let answer = match rx.recv_timeout(self.timeout) {
            Ok(r) => r,
            Err(RecvTimeoutError::Timeout) => {
                lock(&self.waiting).remove(&id);
                return Err(Error::Timeout {
                    method: method.to_string(),
                    after: self.timeout,
                });
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(Error::Closed(self.closed().unwrap_or_default()))
            }
        };
        answer.map_err(|e| match e {
            Error::Rpc { error, .. } => Error::Rpc {
                method: method.to_string(),
                error,
            },
            e => e,
        })
    }

    /// The databases the server has.
    pub fn list_dbs(&self) -> Result<Vec<String>, Error> {
        let r = self.call("list_dbs", json!([]))?;
        r.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .ok_or_else(|| reply("list_dbs", r.clone()))
    }

    /// Database `db`'s schema (as JSON).
    pub fn get_schema(&self, db: &str) -> Result<Value, Error> {
        self.call("get_schema", json!([db]))
    }

    /// Runs `ops` ([`crate::op`]) as one transaction on `db`: all take
    /// effect or none. Their results, in order; the first failed
    /// operation's error otherwise (a failed commit is named by the index
    /// past the last operation).
    pub fn transact(&self, db: &str, ops: Vec<Value>) -> Result<Vec<Value>, Error> {
        let mut params = vec![json!(db)];
        params.extend(ops);
        let r = self.call("transact", Value::Array(params))?;
        let results = r
            .as_array()
            .ok_or_else(|| reply("transact", r.clone()))?
            .clone();
        for (index, res) in results.iter().enumerate() {
            if let Some(error) = res.get("error").filter(|e| !e.is_null()) {
                let details = res
                    .get("details")
                    .and_then(Value::as_str)
                    .map(|d| format!(" ({d})"))
                    .unwrap_or_default();
                return Err(Error::Transaction {
                    index,
                    error: error.as_str().unwrap_or("error").to_string(),
                    details,
                });
            }
        }
        Ok(results)
    }

    /// Starts monitor `id` on `db` for `requests` (table name to
    /// `{"columns": [...]}`, or `{}` for every column): the tables'
    /// contents now; their changes come as [`Notification::Update`].
    pub fn monitor(&self, db: &str, id: Value, requests: Value) -> Result<TableUpdates, Error> {
        let r = self.call("monitor", json!([db, id, requests]))?;
        TableUpdates::from_json(&r)
    }

    /// Stops monitor `id`.
    pub fn monitor_cancel(&self, id: Value) -> Result<(), Error> {
        self.call("monitor_cancel", json!([id])).map(drop)
    }

    /// Asks for lock `id`: true when held now; otherwise
    /// [`Notification::Locked`] comes once it is.
    pub fn lock(&self, id: &str) -> Result<bool, Error> {
        self.lock_call("lock", id)
    }

    /// Takes lock `id` from whoever holds it (they get
    /// [`Notification::Stolen`]).
    pub fn steal(&self, id: &str) -> Result<bool, Error> {
        self.lock_call("steal", id)
    }

    pub fn unlock(&self, id: &str) -> Result<(), Error> {
        self.call("unlock", json!([id])).map(drop)
    }

    fn lock_call(&self, method: &str, id: &str) -> Result<bool, Error> {
        let r = self.call(method, json!([id]))?;
        r.get("locked")
            .and_then(Value::as_bool)
            .ok_or_else(|| reply(method, r.clone()))
    }

    /// Answers with what it was given: the connection is alive.
    pub fn echo(&self) -> Result<(), Error> {
        let r = self.call("echo", json!(["eswitch"]))?;
        if r == json!(["eswitch"]) {
            Ok(())
        } else {
            Err(reply("echo", r))
        }
    }

    /// The next notification, waiting at most `wait`; `None` when none
    /// came (or the connection closed: see [`closed`](Self::closed)).
    pub fn next_notification(&self, wait: Duration) -> Option<Notification> {
        lock(&self.notes).recv_timeout(wait).ok()
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        lock(&self.writer).shutdown();
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}

fn reply(method: &str, reply: Value) -> Error {
    Error::Reply {
        method: method.to_string(),
        reply,
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn send(writer: &Mutex<Stream>, msg: &Value) -> Result<(), Error> {
    let bytes = serde_json::to_vec(msg).map_err(|e| Error::Datum(e.to_string()))?;
    let mut w = lock(writer);
    w.write_all(&bytes)?;
    w.flush()?;
    Ok(())
}

/// Reads the server's values until the stream ends: replies to their
/// callers, `echo` answered, notifications queued.
fn read_loop(
    read: Stream,
    writer: &Mutex<Stream>,
    waiting: &Waiting,
    closed: &Mutex<Option<String>>,
    notes: &Sender<Notification>,
) {
    let values = serde_json::Deserializer::from_reader(BufReader::new(read)).into_iter::<Value>();
    let mut why = "the server closed the connection".to_string();
    for v in values {
        let v = match v {
            Ok(v) => v,
            Err(e) => {
                why = format!("unreadable message from the server: {e}");
                break;
            }
        };
        if let Some(method) = v.get("method").and_then(Value::as_str) {
            let params = v.get("params").cloned().unwrap_or(Value::Null);
            match method {
                "echo" => {
                    let id = v.get("id").cloned().unwrap_or(Value::Null);
                    let _ = send(writer, &json!({"id": id, "result": params, "error": null}));
                }
                "update" => {
                    let monitor = params.get(0).cloned().unwrap_or(Value::Null);
                    if let Some(Ok(updates)) = params.get(1).map(TableUpdates::from_json) {
                        let _ = notes.send(Notification::Update { monitor, updates });
                    }
                }
                "locked" | "stolen" => {
                    let id = params
                        .get(0)
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    let _ = notes.send(if method == "locked" {
                        Notification::Locked(id)
                    } else {
                        Notification::Stolen(id)
                    });
                }
                _ => {}
            }
            continue;
        }
        let Some(id) = v.get("id").and_then(Value::as_u64) else {
            continue;
        };
        let Some(tx) = lock(waiting).remove(&id) else {
            continue; // its caller gave up waiting
        };
        let answer = match v.get("error").filter(|e| !e.is_null()) {
            Some(error) => Err(Error::Rpc {
                method: String::new(),
                error: error.clone(),
            }),
            None => Ok(v.get("result").cloned().unwrap_or(Value::Null)),
        };
        let _ = tx.send(answer);
    }
    *lock(closed) = Some(why.clone());
    for (_, tx) in lock(waiting).drain() {
        let _ = tx.send(Err(Error::Closed(why.clone())));
    }
}
