// Relay-benchmark adapter "nomicore-yws": the Go Nomicore hub's client listener (the
// y-websocket endpoint, package yws), driven by the harness's plain y-protocols client.
// Overlaid onto a copy of the relay harness by scripts/relay/run.sh (it registers this
// adapter in lib/adapters.mjs as SERVERS['nomicore-yws']).
//
// Uses only the hub's CLI and admin API contracts (GUIDE §7–§8):
//   hub token add --data DIR --client bench                (before serve; prints the token)
//   hub serve --listen … --admin-listen 127.0.0.1:A --client-listen 127.0.0.1:P --data DIR
//   POST http://127.0.0.1:A/v1/namespaces  → {"namespaceId"}   (one per document)
//   ws://127.0.0.1:P/v1/yjs/{namespaceId}?token=T           (y-websocket framing)
// The hub binary comes from HUB_BIN.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import crypto from 'node:crypto'
import { spawnSync } from 'node:child_process'
import { freePort } from './proc.mjs'

export const nomicoreYws = () => {
  const bin = process.env.HUB_BIN ? path.resolve(process.env.HUB_BIN) : null
  let dataDir = null
  let adminPort = 0
  let replPort = 0
  let token = ''
  const namespaces = new Map() // document name → namespace id
  const admin = async (method, p, body) => {
    const res = await fetch(`http://127.0.0.1:${adminPort}${p}`, {
      method, signal: AbortSignal.timeout(10000),
      ...(body ? { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } } : {})
    })
    return { status: res.status, text: await res.text() }
  }
  return {
    protocol: 'y-websocket',
    serverNodeLabel: 'native (Go hub, client listener)',
    version: () => {
      if (!bin) return 'HUB_BIN not set'
      const h = crypto.createHash('sha256').update(fs.readFileSync(bin)).digest('hex')
      return `hub binary ${bin} (sha256 ${h.slice(0, 16)}), y-websocket endpoint`
    },
    peerCount: () => 0,
    async beforeStart () {
      if (!bin) throw new Error('nomicore-yws needs HUB_BIN (a built Go hub binary)')
      dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'relay-yws-'))
      adminPort = await freePort()
      replPort = await freePort()
      const r = spawnSync(bin, ['token', 'add', '--data', dataDir, '--client', 'bench'], { timeout: 20000, stdio: ['ignore', 'pipe', 'pipe'] })
      if (r.status !== 0) throw new Error(`hub token add --client: exit ${r.status} ${String(r.stderr).slice(0, 300)}`)
      token = String(r.stdout).trim()
    },
    // The harness waits for TCP on `port`: the client listener.
    start: (port) => ({
      cmd: bin,
      args: ['serve', '--listen', `127.0.0.1:${replPort}`, '--admin-listen', `127.0.0.1:${adminPort}`,
        '--client-listen', `127.0.0.1:${port}`, '--max-clients', '4096', '--data', dataDir, '--log-level', 'warn',
        // Every client of the harness presents the one token: one user with hundreds of
        // connections, each sending as fast as the window lets it — far beyond an editor
        // in normal use, which the per-user and per-connection limits are made for.
        '--max-connections-per-user', '4096', '--client-messages-per-second', '1000000',
        '--client-bytes-per-second', '1073741824', '--awareness-updates-per-second', '1000000'],
      env: {}
    }),
    async afterStart (srv) {
      const deadline = Date.now() + 20000
      for (;;) {
        if (srv.exited) throw new Error(`hub exited: ${JSON.stringify(srv.exited)} ${srv.log.join('').slice(-800)}`)
        try { if ((await admin('GET', '/readyz')).status === 200) return } catch {}
        if (Date.now() > deadline) throw new Error('hub admin API not ready')
        await new Promise(resolve => setTimeout(resolve, 50))
      }
    },
    async prepareDocs (names) {
      for (const name of names) {
        const r = await admin('POST', '/v1/namespaces', { owner: 'default' })
        const j = JSON.parse(r.text)
        if (r.status !== 201 || !/^ns-[0-9a-f]{32}$/.test(j.namespaceId || '')) throw new Error(`POST /v1/namespaces: ${r.status} ${r.text.slice(0, 200)}`)
        namespaces.set(name, j.namespaceId)
      }
    },
    url: (port, doc) => {
      const ns = namespaces.get(doc)
      if (!ns) throw new Error(`no namespace for ${doc}`)
      return `ws://127.0.0.1:${port}/v1/yjs/${ns}?token=${encodeURIComponent(token)}`
    },
    cleanup () {
      if (dataDir) try { fs.rmSync(dataDir, { recursive: true, force: true }) } catch {}
    }
  }
}
