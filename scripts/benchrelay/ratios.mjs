#!/usr/bin/env node
// The ratios of make bench-relay: for each scenario, the hub's server CPU per delivery,
// p99 latency and peak RSS against each other server's, from one run's runs.jsonl
// (written by the relay harness's run.sh).
//
// The machine is shared, so only figures measured side by side compare: each repeat's hub
// figure is divided by the same repeat's figure of the other server, and the summary is the
// median of those per-repeat ratios (never a median of one server's repeats over a median of
// the other's, which would pair a quiet run with a noisy one). A repeat's pair is quiet when
// other processes used at most QUIET_MAX cores during both runs; the median is taken over
// the quiet pairs, or over all pairs (said as "noisy") when there is none.
//
// runs.jsonl has no repeat number: run.sh writes, for each repeat, the attempts of each
// (server node, server, scenario) back to back, and makes another attempt (at most 3) only
// after a noisy one; so a line is another attempt of the repeat before it exactly when it is
// of the same combination and follows a noisy attempt of fewer than 3, and otherwise starts
// that combination's next repeat. Of a repeat's attempts, the last quiet successful one is
// used (else the last successful one).
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
const isHub = (srv) => srv === hub || srv.startsWith(hub + '-')
const quietRun = (r) => (r.foreignCoresDuring ?? 0) <= maxForeign

// The repeats of each combination, in file order: [{ attempts, run (chosen or null) }].
const label = (r) => r.serverNode && !isHub(r.target) ? `${r.target} (${r.serverNode})` : r.target
const repeats = new Map() // scenario → server label → repeats
let prev = null // the previous line's repeat and combination
for (const r of rows) {
  const key = `${r.scenario}\u0000${label(r)}`
  if (!repeats.has(r.scenario)) repeats.set(r.scenario, new Map())
  const bySrv = repeats.get(r.scenario)
  if (!bySrv.has(label(r))) bySrv.set(label(r), [])
  const reps = bySrv.get(label(r))
  const retry = prev && prev.key === key && !quietRun(prev.rep.attempts.at(-1)) && prev.rep.attempts.length < 3
  if (!retry) reps.push({ attempts: [] })
  const rep = reps[reps.length - 1]
  rep.attempts.push(r)
  prev = { key, rep }
}
for (const bySrv of repeats.values()) {
  for (const reps of bySrv.values()) {
    for (const rep of reps) {
      const ok = rep.attempts.filter(r => r.ok)
      rep.run = ok.filter(quietRun).at(-1) ?? ok.at(-1) ?? null
      rep.quiet = rep.run !== null && quietRun(rep.run)
    }
  }
}

const perDelivery = (r) => r.server.cpuWorkloadS / r.deliveries * 1e6
let failed = false
for (const [scenario, bySrv] of repeats) {
  console.log(`\n## ${scenario}\n`)
  console.log('Each server\'s repeats (the run used of each; * = other processes used more than QUIET_MAX cores during it):\n')
  console.log('| server | repeat | server CPU s | CPU µs per delivery | p50 ms | p99 ms | peak RSS MiB | other processes (cores) |')
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|')
  for (const [srv, reps] of bySrv) {
    if (!reps.some(rep => rep.run)) failed = true
    reps.forEach((rep, i) => {
      const r = rep.run
      if (!r) {
        console.log(`| ${srv} | ${i + 1} | failed: ${rep.attempts.at(-1)?.error ?? 'no result'} | | | | | |`)
        return
      }
      console.log(`| ${srv} | ${i + 1}${rep.quiet ? '' : '*'} | ${fmt(r.server.cpuWorkloadS)} | ${fmt(perDelivery(r))} | ${fmt(r.latencyMs?.p50, 1)} | ${fmt(r.latencyMs?.p99, 1)} | ${fmt(r.server.peakRssMiB, 1)} | ${fmt(r.foreignCoresDuring ?? 0)} |`)
    })
  }
  // Each of the hub's endpoints (nomicore: replication; nomicore-yws, nomicore-hocuspocus:
  // the client listener's) against each other server, repeat by repeat.
  for (const [ours, ourReps] of bySrv) {
    if (!isHub(ours)) continue
    for (const [srv, theirReps] of bySrv) {
      if (isHub(srv)) continue
      const pairs = []
      for (let i = 0; i < Math.min(ourReps.length, theirReps.length); i++) {
        const a = ourReps[i].run
        const b = theirReps[i].run
        if (!a || !b) continue
        pairs.push({
          repeat: i + 1,
          quiet: ourReps[i].quiet && theirReps[i].quiet,
          cpu: perDelivery(a) / perDelivery(b),
          p50: a.latencyMs?.p50 / b.latencyMs?.p50,
          p99: a.latencyMs?.p99 / b.latencyMs?.p99,
          rss: a.server.peakRssMiB / b.server.peakRssMiB
        })
      }
      const quiet = pairs.filter(p => p.quiet)
      const use = quiet.length ? quiet : pairs
      const each = pairs.map(p => `${p.repeat}${p.quiet ? '' : '*'}: ${fmt(p.cpu)}`).join(', ')
      console.log(`\n${ours} / ${srv}: CPU per delivery ${fmt(med(use.map(p => p.cpu)))}, p50 ${fmt(med(use.map(p => p.p50)))}, ` +
        `p99 ${fmt(med(use.map(p => p.p99)))}, peak RSS ${fmt(med(use.map(p => p.rss)))} — medians of ${use.length} ` +
        `per-repeat ratios${quiet.length ? ' (quiet pairs)' : pairs.length ? ' (noisy)' : ''}; CPU per delivery by repeat: ${each || 'none'}`)
    }
  }
}
process.exitCode = failed ? 1 : 0
