// zombienet js-script: polkadot.js builds pallet-iota's MergeManifest from the node's own metadata and
// reads each object's BLAKE3 back under `contentHash`. A field named `hash` would be hidden by the codec's
// `hash` getter (the blake2 of the encoding), which is why the pallet names it `content_hash`. Returns 1
// when the stored hashes read back and differ from the codec's hash, 0 otherwise.
async function run(nodeName, networkInfo) {
  const { wsUri, userDefinedTypes } = networkInfo.nodesByName[nodeName];
  const api = await zombie.connect(wsUri, userDefinedTypes);
  const shardHash = "0x" + "ab".repeat(32);
  const checkpointHash = "0x" + "cd".repeat(32);
  const stateHash = "0x" + "ef".repeat(32);
  const valueType = api.query.iota.mergeManifests.creator.meta.type.asMap.value;
  const manifest = api.registry.createType(api.registry.createLookupType(valueType), {
    members: 2,
    paramCount: 10,
    samples: 4,
    shards: [{ key: "0x73", contentHash: shardHash }],
    stateHash,
    checkpoint: { key: "0x63", contentHash: checkpointHash },
  });
  // Round trip through SCALE, as a storage read decodes it.
  const decoded = api.registry.createType(api.registry.createLookupType(valueType), manifest.toU8a());
  await api.disconnect();
  const shard = decoded.shards[0];
  const checkpoint = decoded.checkpoint.unwrap();
  const ok =
    shard.contentHash.toHex() === shardHash &&
    checkpoint.contentHash.toHex() === checkpointHash &&
    decoded.stateHash.toHex() === stateHash &&
    shard.hash.toHex() !== shardHash;
  return ok ? 1 : 0;
}

module.exports = { run };
