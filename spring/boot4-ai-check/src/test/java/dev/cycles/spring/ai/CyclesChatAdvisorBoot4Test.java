package dev.cycles.spring.ai;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.cycles.Caps;
import dev.cycles.LocalServer;
import dev.cycles.internal.Json;
import dev.cycles.spring.CyclesAutoConfiguration;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.ai.chat.client.ChatClient;
import org.springframework.ai.chat.client.ChatClientCustomizer;
import org.springframework.ai.chat.model.ChatModel;
import org.springframework.ai.openai.OpenAiChatModel;
import org.springframework.ai.openai.OpenAiChatOptions;
import org.springframework.ai.tool.ToolCallback;
import org.springframework.ai.tool.definition.ToolDefinition;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * The advisor's jar, built against Spring AI 1.1.2, auto-configured in a Spring Boot 4.0.7
 * context on Spring AI 2.0.1 (immutable options rebuilt by {@code mutate()}; the OpenAI module
 * on openai-java) against the fake provider and the local server: a call and a stream
 * committed, caps lowering the bound and removing a denied tool, a cap of 0 refused before the
 * provider.
 */
class CyclesChatAdvisorBoot4Test {
    private static final HttpClient HTTP = HttpClient.newHttpClient();
    private static Process provider;
    private static String providerUrl;
    private LocalServer server;

    @BeforeAll
    static void startProvider() throws IOException {
        String cli = System.getProperty("cycles.cli");
        if (cli == null || cli.isBlank() || cli.startsWith("${")) {
            throw new IllegalStateException("-Dcycles.cli=<path of the cycles CLI> is required (cargo build -p cycles-cli)");
        }
        provider = new ProcessBuilder(cli, "fake-provider", "--port", "0", "--reply", "The answer is forty two")
                .redirectErrorStream(true).start();
        BufferedReader out = new BufferedReader(new InputStreamReader(provider.getInputStream(), StandardCharsets.UTF_8));
        String line = out.readLine();
        providerUrl = line.substring(line.indexOf("http://")).trim();
        Thread drain = new Thread(() -> {
            try {
                while (out.readLine() != null) {
                    // keep the pipe empty
                }
            } catch (IOException e) {
                // the process ended
            }
        });
        drain.setDaemon(true);
        drain.start();
    }

    @AfterAll
    static void stopProvider() {
        provider.destroy();
    }

    private static String admin(String method, String path) throws Exception {
        return HTTP.send(HttpRequest.newBuilder(URI.create(providerUrl + path)).method(method, HttpRequest.BodyPublishers.noBody())
                .build(), HttpResponse.BodyHandlers.ofString()).body();
    }

    @SuppressWarnings("unchecked")
    private static List<Map<String, Object>> providerRequests() throws Exception {
        return (List<Map<String, Object>>) Json.parse(admin("GET", "/_fake/requests"));
    }

    @BeforeEach
    void reset() throws Exception {
        admin("POST", "/_fake/reset");
    }

    @AfterEach
    void close() {
        if (server != null) {
            server.close();
        }
    }

    @Configuration(proxyBeanMethods = false)
    static class App {
        @Bean
        ChatModel chatModel() {
            return OpenAiChatModel.builder().options(OpenAiChatOptions.builder().baseUrl(providerUrl + "/v1").apiKey("k")
                    .model("gpt-4o-mini").maxRetries(0).build()).build();
        }

        @Bean
        ChatClient.Builder chatClientBuilder(ChatModel model, ObjectProvider<ChatClientCustomizer> customizers) {
            ChatClient.Builder b = ChatClient.builder(model)
                    .defaultOptions(OpenAiChatOptions.builder().model("gpt-4o-mini").maxTokens(64).streamUsage(true));
            customizers.orderedStream().forEach(c -> c.customize(b));
            return b;
        }
    }

    private ApplicationContextRunner runner(Caps caps) {
        LocalServer.Builder b = LocalServer.builder();
        server = (caps == null ? b.budget("tenant:acme", "TOKENS", 1_000_000) : b.budget("tenant:acme", "TOKENS", 1_000_000, caps))
                .start();
        return new ApplicationContextRunner()
                .withConfiguration(AutoConfigurations.of(CyclesAutoConfiguration.class, CyclesAiAutoConfiguration.class))
                .withUserConfiguration(App.class)
                .withPropertyValues("cycles.base-url=" + server.url(), "cycles.api-key=" + server.apiKey(), "cycles.tenant=acme",
                        "cycles.default-unit=TOKENS", "cycles.journal.enabled=false");
    }

    private List<String> ledger() {
        List<String> out = new ArrayList<>();
        for (Object o : (List<?>) Json.parse(server.ledgerJson())) {
            Map<?, ?> e = (Map<?, ?>) o;
            out.add(e.get("kind") + ":" + e.get("amount"));
        }
        return out;
    }

    private static ToolCallback tool(String name) {
        ToolDefinition d = ToolDefinition.builder().name(name).description("the " + name + " tool")
                .inputSchema("{\"type\":\"object\",\"properties\":{}}").build();
        return new ToolCallback() {
            @Override
            public ToolDefinition getToolDefinition() {
                return d;
            }

            @Override
            public String call(String input) {
                return "unused";
            }
        };
    }

    @Test
    void aCallAndAStreamCommitTheUsage() throws Exception {
        runner(null).run(ctx -> {
            ChatClient chat = ctx.getBean(ChatClient.Builder.class).build();
            assertEquals("The answer is forty two", chat.prompt().user("What is the answer?").call().content());
            List<String> parts = chat.prompt().user("What is the answer?").stream().content().collectList().block();
            assertEquals("The answer is forty two", String.join("", parts).trim());
        });
        assertThat(ledger()).hasSize(4);
        assertEquals(List.of("commit:9", "commit:9"), List.of(ledger().get(1), ledger().get(3)));
        assertEquals(64L, ((Number) providerRequests().get(0).get("output_bound")).longValue());
    }

    @Test
    @SuppressWarnings("unchecked")
    void capsLowerTheBoundAndRemoveADeniedTool() throws Exception {
        runner(new Caps(3L, null, null, List.of("shell"), null)).run(ctx -> {
            ChatClient chat = ctx.getBean(ChatClient.Builder.class).build();
            assertEquals("The answer is", chat.prompt().user("What is the answer?").toolCallbacks(tool("search"), tool("shell"))
                    .call().content());
        });
        Map<String, Object> sent = providerRequests().get(0);
        assertEquals(3L, ((Number) sent.get("output_bound")).longValue());
        List<Object> names = new ArrayList<>();
        for (Object t : (List<Object>) ((Map<String, Object>) sent.get("body")).get("tools")) {
            names.add(((Map<String, Object>) ((Map<String, Object>) t).get("function")).get("name"));
        }
        assertEquals(List.of("search"), names);
        assertEquals("commit:7", ledger().get(1));
    }

    @Test
    void aCapOfZeroIsRefusedBeforeTheProvider() throws Exception {
        runner(new Caps(0L, null, null, null, null)).run(ctx -> {
            ChatClient chat = ctx.getBean(ChatClient.Builder.class).build();
            CallNotSentException e = assertThrows(CallNotSentException.class,
                    () -> chat.prompt().user("What is the answer?").call().content());
            assertTrue(e.released());
        });
        assertEquals(List.of(), providerRequests());
        assertThat(ledger()).hasSize(2).last().asString().startsWith("release:");
    }
}
