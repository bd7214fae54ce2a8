package dev.cycles.kotlin

import kotlinx.serialization.json.Json
import kotlinx.serialization.json.JsonArray
import kotlinx.serialization.json.JsonElement
import kotlinx.serialization.json.JsonNull
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.JsonPrimitive
import kotlinx.serialization.json.booleanOrNull
import kotlinx.serialization.json.contentOrNull
import kotlinx.serialization.json.longOrNull

// The bridge speaks JSON text (docs/bindings.md); these read it. Numbers keep their text.

/**
 * How the generated classes cross the bridge: an unset (null) member is not sent, as every
 * face leaves it out; members a class does not know are ignored (each class says so itself).
 */
internal val wireJson = Json {
    explicitNulls = false
    ignoreUnknownKeys = true
}

internal fun json(text: String): JsonElement = Json.parseToJsonElement(text)

internal fun jsonObject(text: String): JsonObject = json(text) as JsonObject

internal fun jsonArray(text: String): JsonArray = json(text) as JsonArray

internal fun JsonObject.str(name: String): String? = (this[name] as? JsonPrimitive)?.contentOrNull

internal fun JsonObject.long(name: String): Long? = (this[name] as? JsonPrimitive)?.longOrNull

internal fun JsonObject.bool(name: String): Boolean = (this[name] as? JsonPrimitive)?.booleanOrNull == true

internal fun JsonObject.obj(name: String): JsonObject? = this[name] as? JsonObject

internal fun JsonObject.arr(name: String): JsonArray = this[name] as? JsonArray ?: JsonArray(emptyList())

internal fun JsonElement?.orNull(): JsonElement? = if (this == null || this is JsonNull) null else this
