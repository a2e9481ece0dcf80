#!/usr/bin/env node
// The ratios of make bench-relay: for each scenario, the hub's server CPU per delivery,
// p99 latency and peak RSS against each other server's, from one run's runs.jsonl
// (written by the relay harness's run.sh). Medians over the successful runs of each
// server; runs during which other processes used more than QUIET_MAX cores are used only
// when no quiet run exists, and the table says so.
//   node ratios.mjs runs.jsonl
import fs from 'node:fs'

const file = process.argv[2]
const maxForeign = Number(process.env.QUIET_MAX ?? 0.1)
const rows = fs.readFileSync(file, 'utf8').split('\n').filter(Boolean).flatMap(l => {
  try { return [JSON.parse(l)] } catch { return [] }
})
const med = (xs) => {
  const s = xs.filter(Number.isFinite).sort((a, b) => a - b)
  if (s.length === 0) return NaN
  const m = Math.floor(s.length / 2)
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2
}
const fmt = (x, d = 2) => Number.isFinite(x) ? x.toFixed(d) : 'n/a'
const hub = 'nomicore'
let failed = false
for (const scenario of [...new Set(rows.map(r => r.scenario))]) {
  const servers = new Map()
  for (const r of rows.filter(r => r.scenario === scenario)) {
    if (!servers.has(r.target)) servers.set(r.target, [])
    servers.get(r.target).push(r)
  }
  const stats = new Map()
  for (const [srv, rs] of servers) {
    const ok = rs.filter(r => r.ok)
    const quiet = ok.filter(r => (r.foreignCoresDuring ?? 0) <= maxForeign)
    const use = quiet.length ? quiet : ok
    if (ok.length === 0) failed = true
    stats.set(srv, {
      runs: `${use.length} of ${rs.length}${quiet.length ? '' : ok.length ? ' (noisy)' : ' (failed)'}`,
      cpuPerDelivery: med(use.map(r => r.server.cpuWorkloadS / r.deliveries * 1e6)),
      cpu: med(use.map(r => r.server.cpuWorkloadS)),
      p50: med(use.map(r => r.latencyMs?.p50)),
      p99: med(use.map(r => r.latencyMs?.p99)),
      rss: med(use.map(r => r.server.peakRssMiB)),
      foreign: med(use.map(r => r.foreignCoresDuring ?? 0)),
      error: ok.length ? '' : (rs[0]?.error ?? 'failed')
    })
  }
  console.log(`\n## ${scenario}\n`)
  console.log('| server | runs used | server CPU s | CPU µs per delivery | p50 ms | p99 ms | peak RSS MiB | other processes (cores) |')
  console.log('|---|---|---:|---:|---:|---:|---:|---:|')
  for (const [srv, s] of stats) {
    console.log(`| ${srv} | ${s.runs} | ${fmt(s.cpu)} | ${fmt(s.cpuPerDelivery)} | ${fmt(s.p50, 1)} | ${fmt(s.p99, 1)} | ${fmt(s.rss, 1)} | ${fmt(s.foreign)} |${s.error ? ' ' + s.error : ''}`)
  }
  // Each of the hub's endpoints (nomicore: replication; nomicore-yws, nomicore-hocuspocus:
  // the client listener's) against each other server.
  for (const [ours, h] of stats) {
    if (ours !== hub && !ours.startsWith(hub + '-')) continue
    for (const [srv, s] of stats) {
      if (srv === hub || srv.startsWith(hub + '-')) continue
      console.log(`\n${ours} / ${srv}: CPU per delivery ${fmt(h.cpuPerDelivery / s.cpuPerDelivery)}, p50 ${fmt(h.p50 / s.p50)}, p99 ${fmt(h.p99 / s.p99)}, peak RSS ${fmt(h.rss / s.rss)}`)
    }
  }
}
process.exitCode = failed ? 1 : 0
