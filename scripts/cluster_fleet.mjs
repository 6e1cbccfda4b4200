// The processes behind scripts/cluster-check.sh: `vtc serve` replicas on
// fixed loopback ports (a restarted replica comes back on its own address,
// as the proxy's config expects) and HAProxy running deploy/haproxy.cfg with
// only its bind addresses and its replicas block replaced. Also reads
// HAProxy's stats (per replica: state, last check, retries).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// A port nobody listens on now (the kernel's pick, then released).
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

// One plain GET: {status, headers, body}, or {status: 0, error} when no answer came.
export function get(port, path, timeoutMs = 2000) {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path, agent: false, timeout: timeoutMs }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body }));
      res.on('error', (e) => resolve({ status: 0, error: e.message }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (e) => resolve({ status: 0, error: e.message }));
  });
}

async function until(what, test, timeoutMs, pollMs = 50) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await test()) return;
    await sleep(pollMs);
  }
  throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}`);
}

// `vtc serve` on one port; start() again after it exited brings it back there.
export class Replica {
  constructor(name, { vtc, model, args, port, logDir }) {
    Object.assign(this, { name, vtc, model, args, port });
    this.logPath = `${logDir}/${name}.log`;
    this.proc = null;
    this.exited = null;  // resolves with the exit code of the current process
  }

  async start() {
    fs.appendFileSync(this.logPath, `--- start on port ${this.port}\n`);
    const log = fs.openSync(this.logPath, 'a');
    this.proc = spawn(this.vtc, ['serve', this.model, '--port', String(this.port), ...this.args],
                      { stdio: ['ignore', log, log] });
    fs.closeSync(log);
    this.exited = new Promise((resolve) => this.proc.once('exit', (code, signal) => resolve(signal ?? code)));
    // Every /health answer before the first 200 is kept: while the model
    // loads (about 0.1 s for the tiny one) it must be 503 "Loading model".
    this.answersWhileStarting = [];
    await until(`${this.name} to answer /health 200`, async () => {
      if (this.proc.exitCode !== null) throw new Error(`${this.name} exited at start: ${this.lastLogLine()}`);
      const health = await get(this.port, '/health');
      if (health.status && health.status !== 200) this.answersWhileStarting.push(`${health.status} ${health.body}`);
      return health.status === 200;
    }, 60000, 5);
    Replica.starts.push(this.answersWhileStarting);
  }

  static starts = [];  // per start, its /health answers before the first 200

  signal(name) { this.proc.kill(name); }

  // A prompt stop: two signals, so the second ends any --drain-delay.
  async stop() {
    this.signal('SIGTERM');
    this.signal('SIGINT');
    return this.exited;
  }
  log() { return fs.readFileSync(this.logPath, 'utf8'); }
  lastLogLine() { return this.log().trim().split('\n').pop(); }
}

// HAProxy on deploy/haproxy.cfg; `balance` is "affinity" or "leastconn".
export class Proxy {
  constructor({ configPath, workDir, port, statsPort }) {
    Object.assign(this, { configPath, workDir, port, statsPort });
    this.proc = null;
  }

  // The shipped config with this run's addresses: every line but the binds
  // and the replicas block is used as written.
  writeConfig(replicas) {
    const text = fs.readFileSync(this.configPath, 'utf8');
    const block = /^ *# --- replicas:.*\n[\s\S]*?^ *# --- end of replicas ---\n/m;
    if (!block.test(text) || !/^ *bind :8080$/m.test(text) || !/^ *bind :8404$/m.test(text))
      throw new Error(`${this.configPath}: no "bind :8080", "bind :8404" or replicas block to replace`);
    const servers = replicas.map((r) => `    server ${r.name} 127.0.0.1:${r.port}\n`).join('') +
      replicas.map((r) => `    use-server ${r.name} if { var(txn.replica) -m str ${r.name} }\n`).join('');
    const config = text.replace(block, `    # --- replicas (cluster-check) ---\n${servers}    # --- end of replicas ---\n`)
      .replace(/^( *)bind :8080$/m, `$1bind 127.0.0.1:${this.port}`)
      .replace(/^( *)bind :8404$/m, `$1bind 127.0.0.1:${this.statsPort}`);
    const path = `${this.workDir}/haproxy.cfg`;
    fs.writeFileSync(path, config);
    return path;
  }

  async start(replicas, balance) {
    const path = this.writeConfig(replicas);
    const env = { ...process.env, VTC_LB_BALANCE: balance === 'leastconn' ? 'leastconn' : '' };
    const log = fs.openSync(`${this.workDir}/haproxy-${balance}.log`, 'a');
    this.proc = spawn('haproxy', ['-db', '-f', path], { stdio: ['ignore', log, log], env });
    fs.closeSync(log);
    this.exited = new Promise((resolve) => this.proc.once('exit', resolve));
    await until('HAProxy to see every replica UP', async () => {
      if (this.proc.exitCode !== null) throw new Error(`haproxy exited: see ${this.workDir}/haproxy-${balance}.log`);
      const rows = await this.stats().catch(() => []);
      return replicas.every((r) => rows.find((row) => row.svname === r.name)?.status === 'UP');
    }, 20000);
  }

  async stop() {
    if (!this.proc || this.proc.exitCode !== null) return;
    this.proc.kill('SIGTERM');
    await this.exited;
  }

  // The backend's rows of the stats CSV, as objects keyed by column name.
  async stats() {
    const res = await get(this.statsPort, '/stats;csv');
    if (res.status !== 200) throw new Error(`stats: ${res.status || res.error}`);
    const [header, ...lines] = res.body.trim().split('\n');
    const columns = header.replace(/^# /, '').split(',');
    return lines.map((line) => Object.fromEntries(line.split(',').map((v, i) => [columns[i], v])))
      .filter((row) => row.pxname === 'vtc_replicas');
  }

  // Retries and redispatches so far (the backend's totals).
  async retries() {
    const backend = (await this.stats()).find((row) => row.svname === 'BACKEND');
    return { retries: Number(backend.wretr), redispatches: Number(backend.wredis) };
  }
}
