// Relay-benchmark adapter "nomicore-hocuspocus": the Go Nomicore hub's Hocuspocus endpoint
// (GET /v1/hocuspocus on the client listener), driven by the harness's raw client with the
// Hocuspocus framing — the same client and the same frames the harness sends to
// @hocuspocus/server ("hocuspocus"), except that the document name is the namespace id the
// hub made for the harness's document and the Auth frame carries the hub's client token.
// Every client has a socket of its own, as in the harness's "hocuspocus" runs. The hub
// acknowledges an update (SyncStatus) and relays it to the document's other clients once it
// is durable on disk; @hocuspocus/server keeps documents in memory only.
// Overlaid onto a copy of the relay harness by scripts/relay/run.sh and
// scripts/benchrelay/bench.sh (each registers it as SERVERS['nomicore-hocuspocus']).
//
// Uses only the hub's CLI and admin API:
//   hub token add --data DIR --client bench                (before serve; prints the token)
//   hub serve --listen … --admin-listen 127.0.0.1:A --client-listen 127.0.0.1:P --data DIR
//   POST http://127.0.0.1:A/v1/namespaces  → {"namespaceId"}   (one per document)
//   ws://127.0.0.1:P/v1/hocuspocus                          (Hocuspocus framing)
// The hub binary comes from HUB_BIN.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import crypto from 'node:crypto'
import { spawnSync } from 'node:child_process'
import * as encoding from 'lib0/encoding'
import * as decoding from 'lib0/decoding'
import { freePort } from './proc.mjs'
import { PROTOCOLS, MSG_SYNC, MSG_AWARENESS, MSG_IGNORE } from './adapters.mjs'

export const nomicoreHocuspocus = () => {
  const bin = process.env.HUB_BIN ? path.resolve(process.env.HUB_BIN) : null
  let dataDir = null
  let adminPort = 0
  let replPort = 0
  let token = ''
  const namespaces = new Map() // the harness's document name → namespace id
  const nsOf = (doc) => {
    const ns = namespaces.get(doc)
    if (!ns) throw new Error(`no namespace for ${doc}`)
    return ns
  }
  const admin = async (method, p, body) => {
    const res = await fetch(`http://127.0.0.1:${adminPort}${p}`, {
      method, signal: AbortSignal.timeout(10000),
      ...(body ? { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } } : {})
    })
    return { status: res.status, text: await res.text() }
  }
  // The Hocuspocus framing of the harness, with the namespace id as the document name and
  // the client token in the Auth frame.
  PROTOCOLS['nomicore-hocuspocus'] = {
    writeHeader (enc, docName) {
      encoding.writeVarString(enc, nsOf(docName))
    },
    onOpen (client) {
      const enc = encoding.createEncoder()
      encoding.writeVarString(enc, nsOf(client.docName))
      encoding.writeVarUint(enc, 2) // Auth
      encoding.writeVarUint(enc, 0) // Token
      encoding.writeVarString(enc, token)
      client.rawSend(encoding.toUint8Array(enc))
    },
    readType (dec, client) {
      decoding.readVarString(dec)
      const t = decoding.readVarUint(dec)
      switch (t) {
        case 0: // Sync
        case 4: // SyncReply
          return MSG_SYNC
        case 1:
          return MSG_AWARENESS
        case 2: {
          const sub = decoding.readVarUint(dec)
          if (sub === 1) client.fail(new Error('nomicore-hocuspocus: permission denied: ' + decoding.readVarString(dec)))
          return MSG_IGNORE
        }
        default: // 8 SyncStatus, 5 Stateless, 7 Close, 9 Ping
          return MSG_IGNORE
      }
    }
  }
  return {
    protocol: 'nomicore-hocuspocus',
    serverNodeLabel: 'native (Go hub, Hocuspocus endpoint)',
    version: () => {
      if (!bin) return 'HUB_BIN not set'
      const h = crypto.createHash('sha256').update(fs.readFileSync(bin)).digest('hex')
      return `hub binary ${bin} (sha256 ${h.slice(0, 16)}), Hocuspocus endpoint`
    },
    peerCount: () => 0,
    async beforeStart () {
      if (!bin) throw new Error('nomicore-hocuspocus needs HUB_BIN (a built Go hub binary)')
      dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'relay-hocus-'))
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
        // sockets, each sending as fast as the window lets it — far beyond an editor in
        // normal use, which the per-user and per-connection limits are made for.
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
    // One socket per client; the document is named inside each frame.
    url: (port, _doc) => `ws://127.0.0.1:${port}/v1/hocuspocus`,
    cleanup () {
      if (dataDir) try { fs.rmSync(dataDir, { recursive: true, force: true }) } catch {}
    }
  }
}
