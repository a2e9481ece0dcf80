// The editor page of a Nomicore node: a text area bound to Y.Text("body") of the namespace,
// synced through the stock y-websocket provider (bundled in yjs-bundle.js), with the
// presence of the other editors of this node (awareness).
(function () {
  'use strict'
  const { Y, WebsocketProvider } = window.NomicoreYjs
  const ns = document.body.dataset.namespace
  const token = new URLSearchParams(location.search).get('token')
  const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:'

  const doc = new Y.Doc()
  const text = doc.getText('body')
  const provider = new WebsocketProvider(scheme + '//' + location.host + '/v1/yjs', ns, doc,
    { params: token ? { token } : {}, disableBc: true })

  const area = document.getElementById('body')
  const status = document.getElementById('status')
  const peers = document.getElementById('peers')
  const notice = document.getElementById('notice')
  if (token) document.getElementById('rich').search = '?token=' + encodeURIComponent(token)

  // Presence: a name and a colour for this tab.
  const hue = Math.floor(Math.random() * 360)
  const me = { name: 'editor-' + doc.clientID.toString(36).slice(-4), color: 'hsl(' + hue + ' 60% 40%)' }
  provider.awareness.setLocalStateField('user', me)
  const showPeers = () => {
    peers.textContent = ''
    provider.awareness.getStates().forEach((state) => {
      if (!state.user) return
      const span = document.createElement('span')
      span.className = 'peer'
      span.style.background = String(state.user.color || '#666')
      span.textContent = String(state.user.name || '?')
      peers.appendChild(span)
    })
  }
  provider.awareness.on('change', showPeers)
  showPeers()

  // The status line: the provider's state, and "read-only" when the page may not write.
  let readOnly = false
  let state = { text: 'connecting…', ok: false }
  const showStatus = () => {
    status.textContent = state.text + (readOnly ? ' · read-only' : '')
    status.className = state.ok ? 'ok' : 'bad'
  }
  const setStatus = (text, ok) => { state = { text, ok }; showStatus() }

  // A read-only token (the node says so in data-access) reads but cannot type: the text
  // area is read-only from the start, and the page says so.
  const setReadOnly = (why) => {
    readOnly = true
    area.readOnly = true
    area.placeholder = 'Read-only: this editor may read the text but not change it.'
    notice.hidden = false
    notice.textContent = why
    showStatus()
  }
  if (document.body.dataset.access === 'read-only') {
    setReadOnly('Read-only: the token of this page may read this namespace but not change it.')
  }

  provider.on('status', (e) => setStatus(e.status, e.status === 'connected'))
  provider.on('sync', (synced) => {
    if (synced) { setStatus('synced', true); area.disabled = false }
  })
  provider.on('closed', (e) => {
    setStatus('closed: ' + e.reason + ' (' + e.code + ')', false)
    area.disabled = true
  })
  // y-websocket reports auth PermissionDenied with console.warn only; show it on the page.
  // A write refused as read-only (the token was made read-only while the page was open)
  // makes the text area read-only too.
  const warn = console.warn
  console.warn = function (...args) {
    if (typeof args[0] === 'string' && args[0].startsWith('Permission denied')) {
      const reason = args[0].split('\n').slice(1).join(' ') || args[0]
      if (/read-only/.test(reason)) {
        setReadOnly('Read-only: ' + reason)
      } else {
        notice.hidden = false
        notice.textContent = reason
      }
    }
    return warn.apply(console, args)
  }

  // Local edits: the difference between the previous and the new value of the text area,
  // as one delete and one insert (Y.Text indices are UTF-16 code units, like JS strings).
  let last = ''
  area.addEventListener('input', () => {
    const now = area.value
    let start = 0
    while (start < last.length && start < now.length && last[start] === now[start]) start++
    let endLast = last.length
    let endNow = now.length
    while (endLast > start && endNow > start && last[endLast - 1] === now[endNow - 1]) { endLast--; endNow-- }
    doc.transact(() => {
      if (endLast > start) text.delete(start, endLast - start)
      if (endNow > start) text.insert(start, now.slice(start, endNow))
    }, 'local')
    last = now
  })

  // Remote edits: new text, the selection moved along with the changes before it.
  text.observe((event) => {
    if (event.transaction.origin === 'local') return
    let selStart = area.selectionStart
    let selEnd = area.selectionEnd
    let pos = 0
    for (const d of event.delta) {
      if (d.retain) {
        pos += d.retain
      } else if (d.insert) {
        const n = typeof d.insert === 'string' ? d.insert.length : 1
        if (pos < selStart) selStart += n
        if (pos < selEnd) selEnd += n
        pos += n
      } else if (d.delete) {
        if (pos < selStart) selStart = Math.max(pos, selStart - d.delete)
        if (pos < selEnd) selEnd = Math.max(pos, selEnd - d.delete)
      }
    }
    last = text.toString()
    area.value = last
    if (document.activeElement === area) area.setSelectionRange(selStart, selEnd)
  })

  window.nomicoreEditor = { doc, text, provider }
})()
