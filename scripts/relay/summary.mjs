#!/usr/bin/env node
// Summary of relay-benchmark runs (bench.mjs JSON lines): per scenario, each server's
// medians and its ratios against Hocuspocus measured in the same run — server CPU per
// delivery (server.cpuWorkloadS / deliveries) and p99 latency.
//   node scripts/relay/summary.mjs runs.jsonl
import fs from 'node:fs'

const rows = process.argv.slice(2).flatMap(f => fs.readFileSync(f, 'utf8').split('\n').filter(Boolean).map(l => JSON.parse(l)))
const med = (xs) => {
  const s = xs.filter(Number.isFinite).sort((a, b) => a - b)
  if (!s.length) return NaN
  const m = Math.floor(s.length / 2)
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2
}
const f = (x, d) => Number.isFinite(x) ? x.toFixed(d) : 'n/a'
const baseline = 'hocuspocus'
for (const scenario of [...new Set(rows.map(r => r.scenario))]) {
  const by = new Map()
  for (const r of rows.filter(r => r.scenario === scenario)) {
    if (!by.has(r.target)) by.set(r.target, [])
    by.get(r.target).push(r)
  }
  const stat = (rs) => {
    const ok = rs.filter(r => r.ok)
    return {
      runs: `${ok.length}/${rs.length}`,
      deliveries: med(ok.map(r => r.deliveries)),
      wallS: med(ok.map(r => r.wallMs / 1000)),
      cpuS: med(ok.map(r => r.server?.cpuWorkloadS)),
      usPerDelivery: med(ok.map(r => 1e6 * r.server?.cpuWorkloadS / r.deliveries)),
      p50: med(ok.map(r => r.latencyMs?.p50)),
      p99: med(ok.map(r => r.latencyMs?.p99)),
      rss: med(ok.map(r => r.server?.peakRssMiB)),
      foreign: med(rs.map(r => r.foreignCoresDuring ?? 0))
    }
  }
  const stats = new Map([...by].map(([k, rs]) => [k, stat(rs)]))
  const base = stats.get(baseline)
  console.log(`\n${scenario}`)
  console.log('| server | ok runs | deliveries | wall s | server CPU s | CPU µs/delivery | ×Hocuspocus CPU/delivery | p50 ms | p99 ms | ×Hocuspocus p99 | peak RSS MiB | foreign cores |')
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
  for (const [name, s] of stats) {
    const cpuRatio = base ? s.usPerDelivery / base.usPerDelivery : NaN
    const p99Ratio = base ? s.p99 / base.p99 : NaN
    console.log(`| ${name} | ${s.runs} | ${f(s.deliveries, 0)} | ${f(s.wallS, 2)} | ${f(s.cpuS, 2)} | ${f(s.usPerDelivery, 2)} | ${f(cpuRatio, 2)} | ${f(s.p50, 1)} | ${f(s.p99, 1)} | ${f(p99Ratio, 2)} | ${f(s.rss, 1)} | ${f(s.foreign, 2)} |`)
  }
}
