// The rich-text editor page of a Nomicore node: Tiptap bound to Y.XmlFragment("default") of
// the namespace (Collaboration), with the other editors' carets and names
// (CollaborationCaret), synced by the real @hocuspocus/provider through the node's
// Hocuspocus endpoint (all bundled in tiptap-bundle.js). The status line says when every
// change typed here is saved: the node acknowledges a change only once it is durable.
(function () {
  'use strict'
  const { Editor, StarterKit, Collaboration, CollaborationCaret, HocuspocusProvider } = window.NomicoreTiptap
  const ns = document.body.dataset.namespace
  const params = new URLSearchParams(location.search)
  const token = params.get('token') || ''
  const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:'

  const status = document.getElementById('status')
  const saved = document.getElementById('saved')
  const peers = document.getElementById('peers')
  const notice = document.getElementById('notice')
  if (token) document.getElementById('plain').search = '?token=' + encodeURIComponent(token)

  const setStatus = (text, ok) => { status.textContent = text; status.className = ok ? 'ok' : 'bad' }
  const say = (text) => { notice.hidden = false; notice.textContent = text }

  const provider = new HocuspocusProvider({
    url: scheme + '//' + location.host + '/v1/hocuspocus',
    name: ns, // the document name is the namespace id
    token,
    onAuthenticationFailed: ({ reason }) => { setStatus('not allowed', false); say('Not allowed: ' + reason) },
    onClose: ({ event }) => { if (event && event.code >= 4000) say('Closed by the node: ' + (event.reason || event.code)) },
  })

  // A name and a colour for this tab (CollaborationCaret shares them as awareness "user").
  const hue = Math.floor(Math.random() * 360)
  const user = { name: params.get('name') || 'editor-' + provider.document.clientID.toString(36).slice(-4), color: 'hsl(' + hue + ', 60%, 40%)' }
  const readOnly = document.body.dataset.access === 'read-only'

  const editor = new Editor({
    element: document.getElementById('editor'),
    editable: !readOnly,
    extensions: [
      StarterKit.configure({ undoRedo: false }), // Yjs keeps the history
      Collaboration.configure({ document: provider.document }),
      CollaborationCaret.configure({ provider, user }),
    ],
  })
  if (readOnly) say('Read-only: the token of this page may read this namespace but not change it.')

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

  const showSaved = () => {
    saved.textContent = provider.hasUnsyncedChanges ? 'saving…' : 'saved'
    saved.className = provider.hasUnsyncedChanges ? 'bad' : 'ok'
  }
  provider.on('unsyncedChanges', showSaved)
  provider.on('status', ({ status: s }) => setStatus(s, s === 'connected'))
  provider.on('authenticated', ({ scope }) => {
    if (scope === 'readonly') { editor.setEditable(false); say('Read-only: the node gives this page read access only.') }
  })
  provider.on('synced', ({ state }) => { if (state) { setStatus('synced', true); showSaved() } })
})()
