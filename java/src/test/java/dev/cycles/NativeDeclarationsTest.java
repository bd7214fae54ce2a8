package dev.cycles;

import static org.junit.jupiter.api.Assertions.assertEquals;
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
 * only as an {@code UnsatisfiedLinkError}, or as a crash, at the first call.
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

    // `pub extern "system" fn Java_..._name<'l>(params) -> ret {`, over several lines as rustfmt
    // writes it; a parameter's type has no parentheses, so `[^)]*` is the whole list.
    static final Pattern EXPORT = Pattern.compile(
            "extern\\s+\"system\"\\s+fn\\s+" + PREFIX + "(\\w+)\\s*(?:<[^>]*>)?\\s*\\(([^)]*)\\)\\s*(?:->\\s*([\\w:]+))?\\s*\\{");
    static final Pattern ANY_EXPORT = Pattern.compile("\\bfn\\s+" + PREFIX + "\\w*");
    static final Pattern NO_MANGLE = Pattern.compile("#\\[(?:unsafe\\()?no_mangle\\)?\\]\\s*(?:#\\[[^\\]]*\\]\\s*)*pub\\s+(?:unsafe\\s+)?$");

    /** One signature, in the declaration's terms: {@code static String clientCall(long, String, String)}. */
    record Signature(boolean isStatic, String ret, String name, List<String> params) {
        @Override
        public String toString() {
            return (isStatic ? "static " : "") + ret + " " + name + "(" + String.join(", ", params) + ")";
        }
    }

    /** Every export of the Rust sources under {@code dir}, by Java method name. */
    static Map<String, Signature> exports(Path dir) throws IOException {
        Map<String, Signature> out = new TreeMap<>();
        List<Path> files;
        try (Stream<Path> s = Files.walk(dir)) {
            files = s.filter(p -> p.toString().endsWith(".rs")).sorted().toList();
        }
        for (Path f : files) {
            String text = Files.readString(f);
            int found = 0;
            Matcher m = EXPORT.matcher(text);
            while (m.find()) {
                found++;
                String where = f.getFileName() + ": " + PREFIX + m.group(1);
                // Without it the symbol is mangled: the JVM would not find it.
                String head = text.substring(Math.max(0, m.start() - 200), m.start());
                assertTrue(NO_MANGLE.matcher(head).find(), where + " is not #[no_mangle] pub");
                String name = jniName(m.group(1), where);
                List<String> params = new ArrayList<>();
                for (String p : m.group(2).split(",")) {
                    if (!p.isBlank()) {
                        params.add(javaType(p.substring(p.indexOf(':') + 1), where));
                    }
                }
                // JNIEnv, then the class (a static method) or the object (an instance method).
                if (params.size() < 2 || !params.get(0).equals("JNIEnv") || !(params.get(1).equals("JClass")
                        || params.get(1).equals("Object"))) {
                    fail(where + " does not start with (JNIEnv, JClass | JObject)");
                }
                boolean isStatic = params.get(1).equals("JClass");
                String ret = m.group(3) == null ? "void" : javaType(m.group(3), where);
                Signature prev = out.put(name, new Signature(isStatic, ret, name, List.copyOf(params.subList(2, params.size()))));
                assertEquals(null, prev, where + " is exported twice");
            }
            // An export this parser could not read must not go unchecked.
            Matcher any = ANY_EXPORT.matcher(text);
            int all = 0;
            while (any.find()) {
                all++;
            }
            assertEquals(all, found, f + ": an export whose signature the test cannot read");
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
        // Not vacuous: the surface is what Native.java declares today (45 methods).
        assertTrue(exported.size() >= 45, "only " + exported.size() + " exports found under " + SOURCES.toAbsolutePath());
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
