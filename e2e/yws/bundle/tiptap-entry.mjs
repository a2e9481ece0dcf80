// The rich-text editor page's bundle (yws/editor/tiptap-bundle.js): Tiptap with its
// Collaboration and CollaborationCaret extensions over the real @hocuspocus/provider, from
// the pinned packages of ../package.json, as one script that defines window.NomicoreTiptap.
// Rebuilt byte for byte by `make editor-bundle`.
export { Editor } from '@tiptap/core'
export { default as StarterKit } from '@tiptap/starter-kit'
export { default as Collaboration } from '@tiptap/extension-collaboration'
export { default as CollaborationCaret } from '@tiptap/extension-collaboration-caret'
export { HocuspocusProvider } from '@hocuspocus/provider'
