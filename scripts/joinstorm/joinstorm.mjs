// joinstorm.mjs: the join storm (make bench-joinstorm). CLIENTS editors — stock y-websocket
// providers under Node, or @hocuspocus/provider against Hocuspocus — join one document of
// about MIB MiB (encoded) within SPREAD_MS, against, in one run:
//
//   hub          a Nomicore hub's editor endpoint (the document loaded through its admin API)
//   peer         a Nomicore peer's editor endpoint (the peer replicates the document from a hub)
//   hocuspocus   @hocuspocus/server (in memory, defaults)
//   y-websocket  @y/websocket-server (in memory, gc on)
//
// For each server: a fresh server process; the document is loaded (kept by a loader
// connection for the Node servers, which drop a document its last editor leaves); one probe
// editor joins until it sees the whole text; then, two seconds later, the storm: the
// editors open their providers at even intervals over SPREAD_MS, spread over WORKERS
// processes (editors.mjs). Measured: the time from the first editor's start until every
// editor's provider said synced (and the median), the server process's peak RSS during the
// storm (VmHWM after resetting it through /proc/PID/clear_refs; where that is refused, the
// largest VmRSS sampled every 10 ms) minus its RSS just before, against the bound 2 × the
// document's encoded size + 64 MiB, and the server's CPU time (utime+stime) during the
// storm; the connections the providers opened (more than CLIENTS when some were dropped and
// reconnected) and, for a Nomicore node, the reasons it logged for closing editors during the
// storm. Then every editor's text is checked against the loaded document (length and
// SHA-256). One JSON line per server, then a table.
//
// The document: Y.Text "body" made by JS yjs of 1 KiB inserts at seeded pseudo-random
// places, 256 to an update, until its encoded state reaches MIB MiB. (Many small structs
// would make the editors' own apply, not the server, the whole cost: a JS yjs history of
// 20 MiB with 330,000 structs takes about 6 s to apply in each editor, so 150 editors would
// keep two cores busy for minutes.)
//
//   node joinstorm.mjs --hub-bin PATH --peer-bin PATH [--servers hub,peer,hocuspocus,y-websocket]
//     [--clients 150] [--spread-ms 1000] [--mib 20] [--workers 3] [--timeout-s 600]
import * as Y from 'yjs'
import { spawn, execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdtempSync, readFileSync, writeFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createInterface } from 'node:readline'
import net from 'node:net'

const here = dirname(fileURLToPath(import.meta.url))
const args = Object.fromEntries(process.argv.slice(2).reduce((a, v, i, all) => {
  if (v.startsWith('--')) a.push([v.slice(2), all[i + 1]])
  return a
}, []))
const opt = {
  hubBin: args['hub-bin'] || process.env.HUB_BIN,
  peerBin: args['peer-bin'] || process.env.PEER_BIN,
  servers: (args.servers || process.env.SERVERS || 'hub,peer,hocuspocus,y-websocket').split(/[ ,]+/).filter(Boolean),
  clients: Number(args.clients || process.env.CLIENTS || 150),
  spreadMs: Number(args['spread-ms'] || process.env.SPREAD_MS || 1000),
  mib: Number(args.mib || process.env.MIB || 20),
  workers: Number(args.workers || process.env.WORKERS || 3),
  timeoutS: Number(args['timeout-s'] || process.env.TIMEOUT_S || 600)
}
const log = (...a) => console.error('joinstorm:', ...a)
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const MiB = 1 << 20

// ---- the document ----

const makeDocument = (mib) => {
  let seed = 0x5eed
  const rnd = () => { // mulberry32
    seed = (seed + 0x6d2b79f5) | 0
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const doc = new Y.Doc()
  doc.clientID = 0x5eed // the same bytes every run (a random id changes the encoded size)
  const text = doc.getText('body')
  const updates = []
  doc.on('update', (u) => updates.push(u))
  let bytes = 0
  for (let n = 0; bytes < mib * MiB - 300 * 1024; n++) {
    doc.transact(() => {
      for (let k = 0; k < 256; k++) {
        const ch = String.fromCharCode(97 + ((n * 256 + k) % 26))
        text.insert(Math.floor(rnd() * (text.length + 1)), ch.repeat(1024))
      }
    })
    bytes += updates[updates.length - 1].length
  }
  const state = Y.encodeStateAsUpdate(doc)
  const s = text.toString()
  return {
    doc, updates, stateBytes: state.length, textLength: s.length,
    textSha256: createHash('sha256').update(s).digest('hex')
  }
}

// ---- processes ----

const freePort = () => new Promise((resolve, reject) => {
  const s = net.createServer()
  s.on('error', reject)
  s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)) })
})

const canConnect = (port) => new Promise((resolve) => {
  const c = net.connect({ port, host: '127.0.0.1' })
  c.once('connect', () => { c.destroy(); resolve(true) })
  c.once('error', () => resolve(false))
})

const children = new Set()
const editorProcs = new Set() // the editors' processes (they also end when their stdin closes)
const startProc = (cmd, argv, env = {}) => {
  const child = spawn(cmd, argv, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  const p = { child, pid: child.pid, lines: [], exited: null, waiters: [] }
  const onLine = (l) => {
    p.lines.push(l)
    if (p.lines.length > 2000) p.lines.shift()
    for (const w of p.waiters) w(l)
  }
  createInterface({ input: child.stdout }).on('line', onLine)
  createInterface({ input: child.stderr }).on('line', onLine)
  child.on('exit', (code, sig) => { p.exited = { code, sig }; children.delete(p) })
  children.add(p)
  return p
}

const stopProc = async (p) => {
  if (!p || p.exited) return
  p.child.kill('SIGINT')
  for (let i = 0; i < 300 && !p.exited; i++) await sleep(100)
  if (!p.exited) { p.child.kill('SIGKILL'); await sleep(200) }
}

// waitLine waits for a JSON log line whose msg is msg and returns it parsed.
const waitLine = (p, msg, timeoutMs = 30000) => new Promise((resolve, reject) => {
  const test = (l) => {
    try { const o = JSON.parse(l); if (o.msg === msg) { resolve(o); return true } } catch {}
    return false
  }
  for (const l of p.lines) if (test(l)) return
  const timer = setTimeout(() => reject(new Error(`no "${msg}" line in 30 s: ${p.lines.slice(-20).join('\n')}`)), timeoutMs)
  p.waiters.push((l) => { if (test(l)) clearTimeout(timer) })
})

const http = async (method, url, body, want) => {
  const res = await fetch(url, {
    method, body,
    headers: body instanceof Uint8Array ? { 'Content-Type': 'application/octet-stream' } : body ? { 'Content-Type': 'application/json' } : {}
  })
  const text = await res.text()
  if (want && res.status !== want) throw new Error(`${method} ${url}: ${res.status} ${text}`)
  return text
}

const procStatus = (pid) => {
  const s = readFileSync(`/proc/${pid}/status`, 'utf8')
  const get = (k) => { const m = s.match(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm')); return m ? Number(m[1]) * 1024 : NaN }
  return { rss: get('VmRSS'), hwm: get('VmHWM') }
}
let CLK_TCK = 100
try { CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100 } catch {}
const procCPU = (pid) => {
  const rest = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const f = rest.slice(rest.lastIndexOf(')') + 2).split(' ')
  return (Number(f[11]) + Number(f[12])) / CLK_TCK
}

// ---- servers: each start() returns {pid (the process measured), url, room, kind, stop()} ----

const nomicoreFlags = ['--client-auth', 'none', '--max-connections-per-user', '10000']

const startHub = async (dir, load) => {
  const hubData = join(dir, 'hub')
  const token = execFileSync(opt.hubBin, ['token', 'add', '--data', hubData, '--peer', 'peer-a'], { stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim()
  const hub = startProc(opt.hubBin, ['serve', '--listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0',
    '--client-listen', '127.0.0.1:0', '--data', hubData, ...nomicoreFlags], { NOMICORE_LOG_FORMAT: 'json' })
  const line = await waitLine(hub, 'hub serving')
  const admin = `http://${line.adminListen}`
  const ns = JSON.parse(await http('POST', `${admin}/v1/namespaces`, JSON.stringify({ owner: 'default' }), 201)).namespaceId
  for (const u of load.updates) await http('POST', `${admin}/v1/namespaces/${ns}/update`, u, 204)
  return { hub, line, ns, token }
}

const servers = {
  hub: async (dir, load) => {
    const { hub, line, ns } = await startHub(dir, load)
    return { pid: hub.pid, proc: hub, kind: 'y-websocket', url: `ws://${line.clientListen}/v1/yjs`, room: ns, stop: () => stopProc(hub) }
  },
  peer: async (dir, load) => {
    const { hub, line, ns, token } = await startHub(dir, load)
    writeFileSync(join(dir, 'peer-a.token'), token + '\n', { mode: 0o600 })
    const peer = startProc(opt.peerBin, ['run', '--instance-id', 'peer-a', '--hub-url', `ws://${line.listen}/v1/replication`,
      '--token-file', join(dir, 'peer-a.token'), '--admin-listen', '127.0.0.1:0', '--client-listen', '127.0.0.1:0',
      '--data', join(dir, 'peer-a'), '--target', ns, ...nomicoreFlags], { NOMICORE_LOG_FORMAT: 'json' })
    const pl = await waitLine(peer, 'peer running')
    const deadline = Date.now() + 180000
    for (;;) {
      const targets = JSON.parse(await http('GET', `http://${pl.adminListen}/v1/targets`, undefined, 200))
      if (targets.some((t) => (t.namespaceId === ns) && t.state === 'live')) break
      if (Date.now() > deadline) throw new Error('the peer did not go live in 3 minutes')
      await sleep(50)
    }
    return { pid: peer.pid, proc: peer, kind: 'y-websocket', url: `ws://${pl.clientListen}/v1/yjs`, room: ns, stop: async () => { await stopProc(peer); await stopProc(hub) } }
  },
  hocuspocus: async (_dir, load) => nodeServer('hocuspocus', [join(here, 'hocuspocus-server.mjs')], load),
  'y-websocket': async (_dir, load) =>
    nodeServer('y-websocket', [join(here, 'node_modules/@y/websocket-server/src/server.js')], load)
}

// nodeServer starts a Node relay and loads the document through a provider that stays
// connected (both drop a document when its last connection closes).
const nodeServer = async (kind, argv, load) => {
  const port = await freePort()
  const p = startProc(process.execPath, argv, { PORT: String(port), HOST: '127.0.0.1' })
  for (let i = 0; !(await canConnect(port)); i++) {
    if (p.exited || i > 200) throw new Error(`${kind} did not start: ${p.lines.join('\n')}`)
    await sleep(100)
  }
  const url = `ws://127.0.0.1:${port}`
  const loader = startProc(process.execPath, [join(here, 'loader.mjs'), JSON.stringify({ kind, url, room: 'joinstorm', file: load.file })])
  await new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`${kind}: loader not ready: ${loader.lines.join('\n')}`)), 120000)
    const check = (l) => { if (l === 'loaded') { clearTimeout(t); resolve() } }
    loader.lines.forEach(check)
    loader.waiters.push(check)
  })
  return { pid: p.pid, kind: kind === 'hocuspocus' ? 'hocuspocus' : 'y-websocket', url, room: 'joinstorm', stop: async () => { await stopProc(loader); await stopProc(p) } }
}

// ---- editors ----

// runEditors starts the processes of n editors (workers of them), waits until they are
// ready, and tells them to start 200 ms later (startAt, returned with them); the synced
// reports go to onSynced.
const runEditors = async (srv, load, n, spreadMs, workers, onSynced) => {
  const procs = []
  for (let w = 0; w < workers; w++) {
    const indices = []
    for (let i = w; i < n; i += workers) indices.push(i)
    if (indices.length === 0) continue
    const cfg = { kind: srv.kind, url: srv.url, room: srv.room, indices, clients: n, spreadMs, textLength: load.textLength, textSha256: load.textSha256 }
    const child = spawn(process.execPath, ['--max-old-space-size=8192', join(here, 'editors.mjs'), JSON.stringify(cfg)], { stdio: ['pipe', 'pipe', 'pipe'] })
    const p = { child, verified: null, err: [] }
    editorProcs.add(child)
    child.on('exit', () => editorProcs.delete(child))
    createInterface({ input: child.stdout }).on('line', (l) => {
      let o
      try { o = JSON.parse(l) } catch { return }
      if (o.ready) p.ready = true
      if (o.syncedMs !== undefined) onSynced(o)
      if (o.verified !== undefined) p.verified = o
    })
    createInterface({ input: child.stderr }).on('line', (l) => { p.err.push(l); if (p.err.length > 50) p.err.shift() })
    child.on('exit', () => { p.exited = true })
    procs.push(p)
  }
  const deadline = Date.now() + 60000
  while (procs.some((p) => !p.ready)) {
    if (Date.now() > deadline || procs.some((p) => p.exited)) {
      await endEditors(procs)
      throw new Error(`editor processes did not start: ${procs.map((p) => p.err.join('\n')).join('\n')}`)
    }
    await sleep(20)
  }
  const startAt = Date.now() + 200
  for (const p of procs) p.child.stdin.write(`start ${startAt}\n`)
  return { procs, startAt }
}

const verifyEditors = async (procs, timeoutMs) => {
  for (const p of procs) p.child.stdin.write('verify\n')
  const deadline = Date.now() + timeoutMs
  while (procs.some((p) => !p.verified) && Date.now() < deadline) await sleep(50)
  const out = { verified: 0, bad: [], connections: 0 }
  for (const p of procs) {
    if (!p.verified) { out.bad.push({ worker: 'no answer', stderr: p.err.slice(-5) }); continue }
    out.verified += p.verified.verified
    out.connections += p.verified.connections
    out.bad.push(...p.verified.bad)
  }
  return out
}

const endEditors = async (procs) => {
  for (const p of procs) p.child.stdin.end()
  for (let i = 0; i < 100 && procs.some((p) => !p.exited); i++) await sleep(100)
  for (const p of procs) if (!p.exited) p.child.kill('SIGKILL')
}

// probe joins one editor until it sees the whole text (the Node servers may still be
// applying the loader's state).
const probe = async (srv, load) => {
  const deadline = Date.now() + 120000
  for (;;) {
    let synced = false
    const { procs } = await runEditors(srv, load, 1, 0, 1, () => { synced = true })
    while (!synced && Date.now() < deadline) await sleep(20)
    const v = synced ? await verifyEditors(procs, 60000) : null
    await endEditors(procs)
    if (v && v.bad.length === 0) return
    if (Date.now() > deadline) throw new Error(`probe editor did not see the document: ${JSON.stringify(v)}`)
    await sleep(1000)
  }
}

// ---- one storm ----

const storm = async (name, load) => {
  const dir = mkdtempSync(join(tmpdir(), 'nomicore-joinstorm-'))
  let srv
  try {
    srv = await servers[name](dir, load)
    await probe(srv, load)
    await sleep(2000)
    const before = procStatus(srv.pid)
    let resetHWM = true
    try { writeFileSync(`/proc/${srv.pid}/clear_refs`, '5') } catch { resetHWM = false }
    let sampledPeak = procStatus(srv.pid).rss
    const sampler = setInterval(() => {
      try { sampledPeak = Math.max(sampledPeak, procStatus(srv.pid).rss) } catch {}
    }, 10)
    const cpu0 = procCPU(srv.pid)
    // A Nomicore node logs each editor's connection and disconnection (with its reason).
    const joins = { disconnected: {} }
    if (srv.proc) {
      srv.proc.waiters.push((l) => {
        let o
        try { o = JSON.parse(l) } catch { return }
        if (o.msg === 'editor disconnected') joins.disconnected[o.reason] = (joins.disconnected[o.reason] || 0) + 1
      })
    }
    const synced = []
    const { procs, startAt } = await runEditors(srv, load, opt.clients, opt.spreadMs, opt.workers, (o) => synced.push(o.syncedMs))
    const deadline = startAt + opt.timeoutS * 1000
    let progressAt = Date.now() + 15000
    while (synced.length < opt.clients && Date.now() < deadline && procs.every((p) => !p.exited)) {
      await sleep(20)
      if (Date.now() > progressAt) {
        progressAt += 15000
        log(`${name}: ${synced.length}/${opt.clients} synced after ${((Date.now() - startAt) / 1000).toFixed(0)} s`)
      }
    }
    clearInterval(sampler)
    const after = procStatus(srv.pid)
    const cpu = procCPU(srv.pid) - cpu0
    const peak = resetHWM ? Math.max(after.hwm, sampledPeak) : sampledPeak
    const v = await verifyEditors(procs, 120000)
    await endEditors(procs)
    synced.sort((a, b) => a - b)
    const bound = 2 * load.stateBytes + 64 * MiB
    return {
      server: name,
      clients: opt.clients,
      synced: synced.length,
      allSyncedMs: synced.length === opt.clients ? synced[synced.length - 1] : null,
      medianSyncedMs: synced.length ? synced[Math.floor(synced.length / 2)] : null,
      rssBefore: before.rss,
      peakRss: peak,
      peakGrowth: peak - before.rss,
      bound,
      withinBound: peak - before.rss <= bound,
      peakFrom: resetHWM ? 'VmHWM' : 'sampled VmRSS',
      cpuS: cpu,
      providerConnections: v.connections,
      ...(srv.proc ? { serverDisconnects: joins.disconnected } : {}),
      verified: v.verified,
      equal: v.verified - v.bad.filter((b) => b.i !== undefined).length,
      bad: v.bad.slice(0, 5),
      ok: synced.length === opt.clients && v.bad.length === 0 && v.verified === opt.clients
    }
  } finally {
    if (srv) await srv.stop()
    rmSync(dir, { recursive: true, force: true })
  }
}

const fmtMiB = (b) => (b / MiB).toFixed(0)
const main = async () => {
  if (opt.servers.some((s) => !servers[s])) throw new Error(`unknown server in ${opt.servers}: want ${Object.keys(servers)}`)
  if (opt.servers.some((s) => s === 'hub' || s === 'peer') && !(opt.hubBin && (opt.peerBin || !opt.servers.includes('peer')))) {
    throw new Error('--hub-bin (and --peer-bin for the peer) are needed')
  }
  const t0 = Date.now()
  const load = makeDocument(opt.mib)
  load.file = join(mkdtempSync(join(tmpdir(), 'nomicore-joinstorm-doc-')), 'document.bin')
  writeFileSync(load.file, Y.encodeStateAsUpdate(load.doc))
  log(`document: ${load.stateBytes} bytes encoded, ${load.textLength} characters, ${load.updates.length} updates (made in ${Date.now() - t0} ms)`)
  const results = []
  for (const name of opt.servers) {
    log(`${name}: ${opt.clients} editors within ${opt.spreadMs} ms`)
    let r
    try {
      r = await storm(name, load)
    } catch (e) {
      r = { server: name, ok: false, error: String(e && e.stack || e) }
    }
    console.log(JSON.stringify({ ...r, stateBytes: load.stateBytes }))
    results.push(r)
  }
  rmSync(dirname(load.file), { recursive: true, force: true })
  console.log('')
  console.log(`join storm: ${opt.clients} editors within ${opt.spreadMs} ms, one document of ${load.stateBytes} bytes encoded (${(load.stateBytes / MiB).toFixed(1)} MiB); bound on the peak RSS growth 2 × ${fmtMiB(load.stateBytes)} + 64 = ${fmtMiB(2 * load.stateBytes + 64 * MiB)} MiB`)
  console.log('')
  console.log('| server | synced | all synced (s) | median (s) | RSS before (MiB) | peak growth (MiB) | within bound | server CPU (s) | connections | texts checked |')
  console.log('|---|---|---|---|---|---|---|---|---|---|')
  for (const r of results) {
    if (r.error) { console.log(`| ${r.server} | failed: ${r.error.split('\n')[0]} ||||||||| `); continue }
    console.log(`| ${r.server} | ${r.synced}/${r.clients} | ${r.allSyncedMs === null ? '—' : (r.allSyncedMs / 1000).toFixed(2)} | ${r.medianSyncedMs === null ? '—' : (r.medianSyncedMs / 1000).toFixed(2)} | ${fmtMiB(r.rssBefore)} | ${fmtMiB(r.peakGrowth)} | ${r.withinBound ? 'yes' : 'no'} | ${r.cpuS.toFixed(1)} | ${r.providerConnections} | ${r.equal}/${r.clients} equal |`)
  }
  // A Node server that leaves editors unsynced within the time is a figure of the table; a
  // Nomicore node that does, or any server that cannot be run, fails the benchmark.
  if (results.some((r) => r.error || (!r.ok && (r.server === 'hub' || r.server === 'peer')))) process.exitCode = 1
}

const cleanup = () => {
  for (const p of children) { try { p.child.kill('SIGKILL') } catch {} }
  for (const c of editorProcs) { try { c.kill('SIGKILL') } catch {} }
}
process.on('exit', cleanup)
process.on('SIGINT', () => { cleanup(); process.exit(130) })
process.on('SIGTERM', () => { cleanup(); process.exit(143) })
main().catch((e) => { log(e && e.stack || e); process.exitCode = 2 })
