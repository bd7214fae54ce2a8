package dev.cycles;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.cycles.internal.Native;
import java.io.IOException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The JNI exports of bindings/jvm/src and the {@code native} methods of {@link Native} are the
 * same set, each pair with the same name, the same parameter types and the same return type
 * (the JNI types of the Rust signature mapped to Java's). A mismatch would otherwise surface
 * only as an {@code UnsatisfiedLinkError}, or as a crash, at the first call. Native.java is
 * generated from the same sources (java/scripts/gen-native.sh); this reads them independently,
 * with its own JNI-to-Java type table, and checks the compiled class.
 */
class NativeDeclarationsTest {
    /** Where the Rust sources are, from java/ (Maven's working directory). */
    static final Path SOURCES = Path.of(System.getProperty("cycles.jvm.sources", "../bindings/jvm/src"));
    static final String PREFIX = "Java_dev_cycles_internal_Native_";

    /** The JNI types the exports use, as the Java types of the declaration. */
    static final Map<String, String> TYPES = Map.ofEntries(Map.entry("JString", "String"), Map.entry("jstring", "String"),
            Map.entry("jlong", "long"), Map.entry("jint", "int"), Map.entry("jboolean", "boolean"),
            Map.entry("jshort", "short"), Map.entry("jbyte", "byte"), Map.entry("jchar", "char"),
            Map.entry("jdouble", "double"), Map.entry("jfloat", "float"), Map.entry("JByteArray", "byte[]"),
            Map.entry("jbyteArray", "byte[]"), Map.entry("JObject", "Object"), Map.entry("jobject", "Object"));

    /** The start of a {@code natives!} block of bindings/jvm/src (the macro is bindings/jvm/src/native.rs). */
    static final Pattern BLOCK = Pattern.compile("(?m)^natives!\\s*\\{");
    // One item's head, the text before its body: `fn name(env, a: jlong, b: JString) -> jstring`
    // (the env parameter has no type: the macro gives it), after its doc comments.
    static final Pattern ITEM = Pattern.compile(
            "^(?:#\\[[^\\]]*\\]\\s*)*fn\\s+(\\w+)\\s*\\(\\s*(\\w+)\\s*((?:,\\s*\\w+\\s*:\\s*\\w+\\s*)*),?\\s*\\)\\s*(?:->\\s*(\\w+))?$");
    // How the macro names each export: without it the JVM would not find the symbol.
    static final String EXPORT_NAME = "#[export_name = concat!(\"" + PREFIX + "\", stringify!($name))]";

    /** One signature, in the declaration's terms: {@code static String clientCall(long, String, String)}. */
    record Signature(boolean isStatic, String ret, String name, List<String> params) {
        @Override
        public String toString() {
            return (isStatic ? "static " : "") + ret + " " + name + "(" + String.join(", ", params) + ")";
        }
    }

    /**
     * The heads of the items of the {@code natives!} block opening at {@code from}: the text at
     * the block's own brace depth before each body, comments dropped (string and char literals
     * are skipped, so a brace in one does not count).
     */
    static List<String> itemHeads(String text, int from, String where) {
        List<String> heads = new ArrayList<>();
        StringBuilder head = new StringBuilder();
        int depth = 0;
        for (int i = from; i < text.length(); i++) {
            char c = text.charAt(i);
            if (c == '/' && i + 1 < text.length() && text.charAt(i + 1) == '/') {
                i = text.indexOf('\n', i);
                if (i < 0) {
                    break;
                }
                continue;
            }
            if (c == '"') {
                for (i++; i < text.length() && text.charAt(i) != '"'; i++) {
                    if (text.charAt(i) == '\\') {
                        i++;
                    }
                }
                continue;
            }
            if (c == '\'' && i + 2 < text.length() && (text.charAt(i + 2) == '\'' || text.charAt(i + 1) == '\\')) {
                i = text.indexOf('\'', i + 2);
                continue;
            }
            if (c == '{') {
                if (depth == 0) {
                    heads.add(head.toString().trim().replaceAll("\\s+", " "));
                    head.setLength(0);
                }
                depth++;
            } else if (c == '}') {
                if (depth == 0) {
                    assertTrue(head.toString().isBlank(), where + ": text after the last item: " + head);
                    return heads;
                }
                depth--;
            } else if (depth == 0) {
                head.append(c);
            }
        }
        fail(where + ": a natives! block without its closing brace");
        return heads;
    }

    /** Every export of the Rust sources under {@code dir}, by Java method name. */
    static Map<String, Signature> exports(Path dir) throws IOException {
        Map<String, Signature> out = new TreeMap<>();
        List<Path> files;
        try (Stream<Path> s = Files.walk(dir)) {
            files = s.filter(p -> p.toString().endsWith(".rs")).sorted().toList();
        }
        String macro = Files.readString(dir.resolve("native.rs"));
        assertTrue(macro.contains(EXPORT_NAME), "native.rs: the natives! macro does not name exports " + PREFIX + "<name>");
        assertTrue(macro.contains("_class: jni::objects::JClass<'l>"), "native.rs: the natives! exports are not static (JClass)");
        for (Path f : files) {
            String text = Files.readString(f);
            assertFalse(Pattern.compile("\\bfn\\s+" + PREFIX).matcher(text).find(),
                    f.getFileName() + ": an export written by hand (use natives!)");
            Matcher block = BLOCK.matcher(text);
            while (block.find()) {
                for (String head : itemHeads(text, block.end(), f.getFileName().toString())) {
                    Matcher m = ITEM.matcher(head);
                    // An item this parser could not read must not go unchecked.
                    assertTrue(m.matches(), f.getFileName() + ": a natives! item whose signature the test cannot read: " + head);
                    String where = f.getFileName() + ": " + m.group(1);
                    String name = jniName(m.group(1), where);
                    List<String> params = new ArrayList<>();
                    for (String p : m.group(3).split(",")) {
                        if (!p.isBlank()) {
                            params.add(javaType(p.substring(p.indexOf(':') + 1), where));
                        }
                    }
                    String ret = m.group(4) == null ? "void" : javaType(m.group(4), where);
                    Signature prev = out.put(name, new Signature(true, ret, name, List.copyOf(params)));
                    assertEquals(null, prev, where + " is exported twice");
                }
            }
        }
        return out;
    }

    /** The Java name of a JNI short name: {@code _1} is an underscore; overloads (__sig) are not used. */
    static String jniName(String mangled, String where) {
        if (mangled.contains("__") || mangled.matches(".*_[02-9].*")) {
            fail(where + ": overloaded or escaped JNI names are not supported by this check");
        }
        return mangled.replace("_1", "_");
    }

    static String javaType(String rust, String where) {
        String t = rust.trim().replaceAll("<[^>]*>", "");
        t = t.substring(t.lastIndexOf(':') + 1).trim();
        if (t.equals("JNIEnv") || t.equals("JClass")) {
            return t;
        }
        String java = TYPES.get(t);
        if (java == null) {
            fail(where + ": JNI type " + rust.trim() + " has no Java mapping in this test");
        }
        return java;
    }

    /** Every {@code native} method of {@code c}, by name. */
    static Map<String, Signature> declarations(Class<?> c) {
        Map<String, Signature> out = new TreeMap<>();
        for (Method m : c.getDeclaredMethods()) {
            if (!Modifier.isNative(m.getModifiers())) {
                continue;
            }
            List<String> params = new ArrayList<>();
            for (Class<?> p : m.getParameterTypes()) {
                params.add(p.getSimpleName());
            }
            Signature prev = out.put(m.getName(),
                    new Signature(Modifier.isStatic(m.getModifiers()), m.getReturnType().getSimpleName(), m.getName(), params));
            assertEquals(null, prev, m.getName() + " is declared twice (overloads need JNI signature suffixes)");
        }
        return out;
    }

    /** Both directions: no export without a declaration, no declaration without an export, equal signatures. */
    static List<String> mismatches(Map<String, Signature> exported, Map<String, Signature> declared) {
        List<String> out = new ArrayList<>();
        for (Signature e : exported.values()) {
            Signature d = declared.get(e.name());
            if (d == null) {
                out.add("exported but not declared in Native.java: " + e);
            } else if (!d.equals(e)) {
                out.add("Native.java declares " + d + ", the export is " + e);
            }
        }
        for (Signature d : declared.values()) {
            if (!exported.containsKey(d.name())) {
                out.add("declared in Native.java but not exported by bindings/jvm: " + d);
            }
        }
        return out;
    }

    @Test
    void everyExportHasItsDeclarationAndViceVersa() throws IOException {
        Map<String, Signature> exported = exports(SOURCES);
        Map<String, Signature> declared = declarations(Native.class);
        assertEquals(List.of(), mismatches(exported, declared));
        // Not vacuous: the surface is what Native.java declares today (49 methods).
        assertTrue(exported.size() >= 49, "only " + exported.size() + " exports found under " + SOURCES.toAbsolutePath());
        assertEquals(declared.keySet(), exported.keySet());
    }

    /** The comparison itself catches each kind of drift (a made-up pair of tables). */
    @Test
    void eachKindOfDriftIsReported() {
        Signature call = new Signature(true, "String", "clientCall", List.of("long", "String", "String"));
        Map<String, Signature> exported = Map.of("clientCall", call, "gone", new Signature(true, "void", "gone", List.of()));
        Map<String, Signature> declared = Map.of("clientCall", new Signature(true, "String", "clientCall", List.of("long", "String")),
                "extra", new Signature(true, "long", "extra", List.of("int")));
        List<String> got = mismatches(exported, declared);
        assertEquals(3, got.size(), got.toString());
        assertTrue(got.stream().anyMatch(s -> s.startsWith("Native.java declares static String clientCall(long, String)")), got.toString());
        assertTrue(got.stream().anyMatch(s -> s.startsWith("exported but not declared") && s.contains("gone")), got.toString());
        assertTrue(got.stream().anyMatch(s -> s.startsWith("declared in Native.java but not exported") && s.contains("extra")),
                got.toString());
        assertEquals("String", javaType(" JString<'l>", "t"));
        assertEquals("byte[]", javaType("jni::objects::JByteArray<'l>", "t"));
        assertEquals("boolean", javaType("jni::sys::jboolean", "t"));
    }
}
