//! A real PostgreSQL server for a test: Debian's `postgresql` binaries,
//! `initdb` into a temporary directory (as the `postgres` user when run as
//! root: PostgreSQL refuses to run as root), password authentication
//! (scram-sha-256) on 127.0.0.1 at a free port. Stopped and removed on drop.
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The directory with initdb and postgres: $BLOATLAB_PG_BIN, else the
/// newest /usr/lib/postgresql/N/bin, else PATH.
pub fn bin_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("BLOATLAB_PG_BIN") {
        return Some(PathBuf::from(d));
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
        .filter(|(_, p): &(u32, PathBuf)| p.join("initdb").is_file())
        .collect();
    versions.sort();
    versions.pop().map(|v| v.1).or_else(|| {
        std::env::split_paths(&std::env::var_os("PATH")?).find(|d| d.join("initdb").is_file() && d.join("postgres").is_file())
    })
}

pub struct Server {
    dir: PathBuf,
    bin: PathBuf,
    child: Option<Child>,
    pub port: u16,
    pub user: String,
    pub password: String,
    as_postgres: bool,
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(1) == Some("0")))
        .unwrap_or(false)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Server {
    /// initdb and start; Err says why not (no binaries, initdb failed...).
    pub fn start() -> Result<Server, String> {
        let bin = bin_dir().ok_or("no PostgreSQL binaries (apt-get install postgresql; or set BLOATLAB_PG_BIN)")?;
        let as_postgres = is_root();
        let dir = std::env::temp_dir().join(format!("bloatlab-pg-{}-{}", std::process::id(), free_port()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let password = format!("pw{}", free_port());
        std::fs::write(dir.join("pwfile"), &password).map_err(|e| e.to_string())?;
        if as_postgres {
            let st = Command::new("chown").args(["-R", "postgres:postgres"]).arg(&dir).status().map_err(|e| format!("chown: {e}"))?;
            if !st.success() {
                return Err("chown to the postgres user failed (is the postgresql package installed?)".into());
            }
        }
        let user = "bloatlab".to_string();
        let mut srv = Server { dir: dir.clone(), bin: bin.clone(), child: None, port: free_port(), user: user.clone(), password, as_postgres };
        let data = dir.join("data");
        let out = srv
            .cmd("initdb")
            .arg("-D")
            .arg(&data)
            .args(["-U", &user, "--auth=scram-sha-256", "--encoding=UTF8", "--locale=C"])
            .arg(format!("--pwfile={}", dir.join("pwfile").display()))
            .output()
            .map_err(|e| format!("initdb: {e}"))?;
        if !out.status.success() {
            return Err(format!("initdb failed: {}", String::from_utf8_lossy(&out.stderr)));
        }
        srv.launch()?;
        Ok(srv)
    }

    fn cmd(&self, tool: &str) -> Command {
        let exe = self.bin.join(tool);
        if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(exe);
            c
        } else {
            Command::new(exe)
        }
    }

    /// Start the server (again, after [`Server::stop`]) and wait until it takes connections.
    pub fn launch(&mut self) -> Result<(), String> {
        let log = std::fs::File::create(self.dir.join("server.log")).map_err(|e| e.to_string())?;
        let child = self
            .cmd("postgres")
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-k"])
            .arg(&self.dir)
            .args(["-c", "max_connections=200", "-c", "fsync=off"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("postgres: {e}"))?;
        self.child = Some(child);
        let until = Instant::now() + Duration::from_secs(30);
        while Instant::now() < until {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() && self.log().contains("ready to accept connections") {
                return Ok(());
            }
            if let Some(Ok(Some(st))) = self.child.as_mut().map(|c| c.try_wait()) {
                return Err(format!("postgres exited ({st}): {}", self.log()));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(format!("postgres did not start within 30 s: {}", self.log()))
    }

    /// Stop the server now (an immediate shutdown: clients see it vanish).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // the postmaster's own pid (under runuser it is runuser's child)
            let pid = std::fs::read_to_string(self.dir.join("data/postmaster.pid"))
                .ok()
                .and_then(|s| s.lines().next().map(str::to_string))
                .unwrap_or_else(|| c.id().to_string());
            let _ = Command::new("kill").args(["-QUIT", pid.trim()]).status();
            let until = Instant::now() + Duration::from_secs(15);
            while Instant::now() < until {
                if let Ok(Some(_)) = c.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = c.kill();
            let _ = c.wait();
            // the log is kept; a fresh one for the next launch
            let _ = std::fs::rename(self.dir.join("server.log"), self.dir.join(format!("server-{}.log", Instant::now().elapsed().as_nanos())));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// postgres://bloatlab:PASSWORD@127.0.0.1:PORT/postgres (TLS off: a loopback server without a certificate).
    pub fn url(&self) -> String {
        format!("postgres://{}:{}@127.0.0.1:{}/postgres?sslmode=disable", self.user, self.password, self.port)
    }

    /// Run SQL with psql (as the superuser); its output.
    pub fn psql(&self, sql: &str) -> Result<String, String> {
        let out = Command::new(self.bin.join("psql"))
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", &self.user, "-d", "postgres", "-At", "-c", sql])
            .env("PGPASSWORD", &self.password)
            .output()
            .map_err(|e| format!("psql: {e}"))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).to_string());
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
        if std::env::var_os("BLOATLAB_KEEP_PG").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
