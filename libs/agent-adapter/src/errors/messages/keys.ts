/** Checkpoint and encryption keys (CheckpointKeyError; a missing key at setup is DurableSetupError). */
export const KeyMessages = {
  keyTooShort: (bytes: number) =>
    `The checkpoint key is ${bytes} bytes; at least 32 are required. Generate one with: node -e "console.log(require('crypto').randomBytes(32).toString('base64'))" and give the same key to every worker.`,
  keyRequired: (owner: string, store: string, option: string) =>
    `${owner}: the ${store} is shared between processes, so "${option}" is required: a secret of at least 32 bytes, the same on every worker (e.g. ${option}: process.env.CHECKPOINT_KEY). Generate one with: node -e "console.log(require('crypto').randomBytes(32).toString('base64'))"`,
  encryptedUnknownKey: (runId: string, what: string, id: string) =>
    `Run "${runId}": the ${what} is encrypted with key id "${id}", which is not in this worker's encryption key ring. Give every worker the same encryptionKey (add an old key to its previous keys after a rotation). Nothing was changed.`,
  noEncryptionKey: (runId: string, what: string) =>
    `Run "${runId}": the ${what} is encrypted, and this worker has no encryption key. Give it the same encryptionKey as the workers that wrote the run. Nothing was changed.`,
  encryptedUnreadable: (runId: string, what: string, why: string) =>
    `Run "${runId}": the ${what} cannot be read: ${why}. Nothing was run from it.`,
  keyId: (id: string) =>
    `Key id "${id}" may only contain letters, digits, "_" and "-".`,
  previousNotArray: (got: unknown) =>
    // Its kind only: never key material in a message.
    `The key ring's "previous" must be an array of the earlier keys (each a secret or { id, secret }), got ${typeof got === 'object' ? 'an object' : `a ${typeof got}`}: { current: NEW, previous: [OLD] }.`,
  encryptionIsMac: (encryptionId: string, checkpointId: string) =>
    `The encryption key must not be a checkpoint key: encryption key "${encryptionId}" has the secret of checkpoint key "${checkpointId}" (a key that signs records must not also encrypt them: key separation). Give encryptionKey a secret of its own (32+ bytes): node -e "console.log(require('crypto').randomBytes(32).toString('base64'))"`,
  unknownKeyId: (kid: string) =>
    `No key with id "${kid}" is in the checkpoint key ring. Add the old key to the ring's previous keys (checkpointKey: { current, previous: [old] }) so runs signed with it can still be verified.`,
} as const;
