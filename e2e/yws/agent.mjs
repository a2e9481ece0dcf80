// An editor agent for the Go end-to-end tests: stock y-websocket 3.x WebsocketProvider
// editors (with the `ws` package as the WebSocket) — and the signed tokens an application's
// server mints for them with the `jose` package — driven over stdin/stdout, one JSON
// request per line, {"id":N,"op":"…",…}; each answer is one line {"id":N,"ok":true,
// "result":…} or {"id":N,"ok":false,"error":"…"}. Requests run concurrently (a wait does
// not block the next request). The agent exits when stdin closes.
import * as Y from 'yjs'
import { WebsocketProvider } from 'y-websocket'
import WebSocket from 'ws'
import * as jose from 'jose'
import { awarenessOps, serve, sleep, waitUntil } from '../agentlib.mjs'

const editors = new Map() // name → { doc, provider, events }

// y-websocket reports auth PermissionDenied with console.warn("Permission denied to access
// URL.\nREASON"): record it on the editor whose URL it names.
const warn = console.warn
console.warn = (...args) => {
  const msg = String(args[0] ?? '')
  if (msg.startsWith('Permission denied to access ')) {
    for (const e of editors.values()) {
      if (msg.startsWith('Permission denied to access ' + e.provider.url + '.')) {
        e.events.push({ type: 'permission-denied', reason: msg.split('\n').slice(1).join('\n') })
      }
    }
    return
  }
  warn(...args)
}

function editor (name) {
  const e = editors.get(name)
  if (!e) throw new Error('no editor ' + name)
  return e
}

const ops = {
  ...awarenessOps((name) => editor(name).provider.awareness),
  // open: a new editor (a fresh Y.Doc) on url/ns; with wait (default true) it resolves once
  // synced. token goes as ?token= unless bearer is set (then an Authorization header).
  async open ({ name, url, ns, token, bearer, wait = true, timeoutMs }) {
    const doc = new Y.Doc()
    const events = []
    const params = token && !bearer ? { token } : {}
    class WS extends WebSocket {
      constructor (address, protocols) {
        super(address, protocols, bearer ? { headers: { Authorization: 'Bearer ' + token } } : {})
        // Listening for the refusal takes over ending the handshake from ws: once the body
        // is read, terminate() fails the connection as ws would (error, then close 1006),
        // so the provider reconnects after a refused upgrade as it does in a browser.
        this.on('unexpected-response', (_req, res) => {
          let body = ''
          res.on('data', (c) => { body += c })
          res.on('end', () => {
            events.push({ type: 'refused', status: res.statusCode, body })
            this.terminate()
          })
        })
      }
    }
    const provider = new WebsocketProvider(url, ns, doc, { params, WebSocketPolyfill: WS, disableBc: true })
    provider.on('connection-close', (ev) => { if (ev) events.push({ type: 'close', code: ev.code, reason: ev.reason }) })
    provider.on('closed', (ev) => events.push({ type: 'closed', code: ev.code, reason: ev.reason }))
    editors.set(name, { doc, provider, events })
    if (wait) await waitUntil(name + ' synced', timeoutMs, () => provider.synced)
    return { clientID: doc.clientID }
  },
  async insert ({ name, index, text }) {
    const t = editor(name).doc.getText('body')
    t.insert(index ?? t.length, text)
    return t.length
  },
  async setMeta ({ name, key, value }) {
    editor(name).doc.getMap('meta').set(key, value)
    return null
  },
  async text ({ name }) { return editor(name).doc.getText('body').toString() },
  async waitText ({ name, text, timeoutMs }) {
    const t = editor(name).doc.getText('body')
    await waitUntil(name + ' text', timeoutMs, () => t.toString() === text)
    return null
  },
  async waitLength ({ name, length, timeoutMs }) {
    const t = editor(name).doc.getText('body')
    await waitUntil(name + ' text length ' + length, timeoutMs, () => t.length === length)
    return t.toString().length
  },
  async synced ({ name, timeoutMs }) {
    const p = editor(name).provider
    await waitUntil(name + ' synced', timeoutMs, () => p.synced)
    return null
  },
  async setAwareness ({ name, state }) {
    editor(name).provider.awareness.setLocalState(state)
    return null
  },
  // presenceBench: editors stock providers spread round-robin over urls (the nodes), each
  // moving its cursor rate times a second for seconds (its state carries the time of the
  // move); the first editor of each node measures, for every state change it hears, the time
  // from the move to its arrival, apart for moves made on its own node and on others. It
  // resolves with the latencies' percentiles and counts, then closes the editors.
  // (tokens, when given, is each node's token instead of one token for all.)
  async presenceBench ({ urls, ns, token, tokens, editors: n, rate, seconds }) {
    const eds = []
    for (let i = 0; i < n; i++) {
      const node = i % urls.length
      const doc = new Y.Doc()
      const params = { token: tokens ? tokens[node] : token }
      const provider = new WebsocketProvider(urls[node], ns, doc, { params, WebSocketPolyfill: WebSocket, disableBc: true })
      eds.push({ i, node, doc, provider })
    }
    await waitUntil('bench editors synced', 60000, () => eds.every((e) => e.provider.synced))
    const local = []
    const remote = []
    const nodeOf = new Map() // client id → node index
    for (const e of eds) nodeOf.set(e.doc.clientID, e.node)
    for (const v of eds.slice(0, urls.length)) {
      v.provider.awareness.on('change', ({ added, updated }) => {
        const now = Date.now()
        for (const id of added.concat(updated)) {
          const st = v.provider.awareness.getStates().get(id)
          if (!st || typeof st.t !== 'number' || id === v.doc.clientID) continue
          ;(nodeOf.get(id) === v.node ? local : remote).push(now - st.t)
        }
      })
    }
    const period = 1000 / rate
    const end = Date.now() + seconds * 1000
    const timers = eds.map((e, k) => setTimeout(function move (cursor) {
      if (Date.now() >= end) return
      e.provider.awareness.setLocalState({ user: { name: 'e' + e.i }, cursor, t: Date.now() })
      timers[k] = setTimeout(move, period, cursor + 1)
    }, Math.floor(Math.random() * period), 0))
    await sleep(seconds * 1000 + 2000)
    timers.forEach(clearTimeout)
    for (const e of eds) { e.provider.destroy(); e.doc.destroy() }
    const pct = (a, p) => {
      if (a.length === 0) return null
      const s = a.slice().sort((x, y) => x - y)
      return s[Math.min(s.length - 1, Math.floor(p * s.length))]
    }
    return {
      moves: Math.round(n * rate * seconds),
      local: { count: local.length, p50: pct(local, 0.5), p99: pct(local, 0.99) },
      remote: { count: remote.length, p50: pct(remote, 0.5), p99: pct(remote, 0.99) }
    }
  },
  // flood: each named editor sets a state of about bytes bytes every 1000/rate ms for
  // seconds, in the background (it resolves at once).
  async flood ({ names, bytes, rate, seconds }) {
    const pad = 'x'.repeat(bytes)
    const end = Date.now() + seconds * 1000
    for (const name of names) {
      const aw = editor(name).provider.awareness
      let n = 0
      const timer = setInterval(() => {
        if (Date.now() >= end || !editors.has(name)) { clearInterval(timer); return }
        aw.setLocalState({ user: { name }, n: n++, pad })
      }, 1000 / rate)
    }
    return null
  },
  async events ({ name }) { return editor(name).events },
  async waitEvent ({ name, type, timeoutMs }) {
    const e = editor(name)
    return await waitUntil(name + ' ' + type, timeoutMs, () => e.events.find((ev) => ev.type === type))
  },
  // mint: a signed token (JWT) made with jose as an application's server would: alg, the
  // key (a private JWK, or secret: the HS256 secret as a string), kid, and the claims;
  // expiresIn (e.g. '1h', '3s') sets exp and iat unless the claims give them.
  async mint ({ alg, jwk, secret, kid, claims, expiresIn }) {
    const key = secret !== undefined ? new TextEncoder().encode(secret) : await jose.importJWK(jwk, alg)
    const header = { alg, typ: 'JWT' }
    if (kid) header.kid = kid
    const jwt = new jose.SignJWT(claims).setProtectedHeader(header)
    if (claims.iat === undefined) jwt.setIssuedAt()
    if (claims.exp === undefined && expiresIn) jwt.setExpirationTime(expiresIn)
    return await jwt.sign(key)
  },
  // retoken: what an application does when the node closed its editor with 4401 (its token
  // expired or was revoked): the provider gets a fresh token and connects again; it
  // resolves once synced.
  async retoken ({ name, token, timeoutMs }) {
    const e = editor(name)
    e.provider.params = { ...e.provider.params, token }
    e.provider.connect()
    await waitUntil(name + ' synced again', timeoutMs, () => e.provider.wsconnected && e.provider.synced)
    return null
  },
  async close ({ name }) {
    const e = editor(name)
    e.provider.destroy()
    e.doc.destroy()
    editors.delete(name)
    return null
  }
}

serve(ops, () => {
  for (const e of editors.values()) { try { e.provider.destroy() } catch {} }
})
