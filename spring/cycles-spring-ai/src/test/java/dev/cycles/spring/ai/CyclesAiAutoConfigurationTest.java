package dev.cycles.spring.ai;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.cycles.Caps;
import dev.cycles.CyclesClient;
import dev.cycles.CyclesEvent;
import dev.cycles.LocalServer;
import dev.cycles.Pricing;
import dev.cycles.internal.Json;
import dev.cycles.spring.CyclesAutoConfiguration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
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
import org.springframework.ai.openai.api.OpenAiApi;
import org.springframework.ai.tool.ToolCallback;
import org.springframework.ai.tool.definition.ToolDefinition;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.context.properties.source.InvalidConfigurationPropertyValueException;
import org.springframework.boot.test.context.FilteredClassLoader;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.retry.support.RetryTemplate;

/**
 * The advisor as an auto-configured bean in a real Spring context (the Cycles client from
 * {@code cycles.*}, the advisor from {@code cycles.ai.*}, a {@code ChatClient.Builder} applying
 * the customizers as Spring AI's auto-configuration does) over Spring AI's OpenAI model against
 * the fake provider and the local server; and the caps through the core's {@code plan_caps}:
 * max tokens lowered, denied tools removed (and a tool choice naming one), the
 * {@code caps_applied} event, a cap of 0 refusing the call before the provider sees it.
 */
class CyclesAiAutoConfigurationTest {
    private LocalServer server;

    @BeforeAll
    static void startProvider() throws Exception {
        FakeProvider.start();
    }

    @AfterAll
    static void stopProvider() {
        FakeProvider.stop();
    }

    @BeforeEach
    void reset() throws Exception {
        FakeProvider.admin("POST", "/_fake/reset", null);
    }

    @AfterEach
    void close() {
        if (server != null) {
            server.close();
        }
    }

    /** The application: a model on the fake provider, and the builder Spring AI's auto-configuration would give. */
    @Configuration(proxyBeanMethods = false)
    static class App {
        @Bean
        ChatModel chatModel() {
            return OpenAiChatModel.builder().openAiApi(OpenAiApi.builder().baseUrl(FakeProvider.url()).apiKey("k").build())
                    .retryTemplate(RetryTemplate.builder().maxAttempts(1).build()).build();
        }

        @Bean
        ChatClient.Builder chatClientBuilder(ChatModel model, ObjectProvider<ChatClientCustomizer> customizers) {
            ChatClient.Builder b = ChatClient.builder(model)
                    .defaultOptions(OpenAiChatOptions.builder().model("gpt-4o-mini").maxTokens(64).build());
            customizers.orderedStream().forEach(c -> c.customize(b));
            return b;
        }
    }

    private ApplicationContextRunner runner(LocalServer s, String... more) {
        server = s;
        List<String> props = new ArrayList<>(List.of("cycles.base-url=" + s.url(), "cycles.api-key=" + s.apiKey(),
                "cycles.tenant=acme", "cycles.default-unit=TOKENS", "cycles.journal.enabled=false"));
        props.addAll(List.of(more));
        return new ApplicationContextRunner()
                .withConfiguration(AutoConfigurations.of(CyclesAutoConfiguration.class, CyclesAiAutoConfiguration.class))
                .withUserConfiguration(App.class).withPropertyValues(props.toArray(String[]::new));
    }

    private static LocalServer tokens(Caps caps) {
        LocalServer.Builder b = LocalServer.builder();
        return (caps == null ? b.budget("tenant:acme", "TOKENS", 1_000_000) : b.budget("tenant:acme", "TOKENS", 1_000_000, caps))
                .start();
    }

    private List<String> ledger() {
        List<String> out = new ArrayList<>();
        for (Object o : (List<?>) Json.parse(server.ledgerJson())) {
            Map<?, ?> e = (Map<?, ?>) o;
            out.add(e.get("kind") + ":" + e.get("amount"));
        }
        return out;
    }

    private static long estimate(String text, int bound) {
        String args = "{\"pricing\":{\"unit\":\"TOKENS\"},\"model\":\"gpt-4o-mini\",\"request\":{\"model\":\"gpt-4o-mini\","
                + "\"messages\":[{\"role\":\"user\",\"content\":" + Json.write(text) + "}],\"max_tokens\":" + bound + "}}";
        Map<?, ?> out = (Map<?, ?>) Json.parse(Pricing.call("estimate_request", args));
        return ((Number) ((Map<?, ?>) out.get("amount")).get("amount")).longValue();
    }

    /** A tool the model is offered (never called: the fake provider answers with text). */
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
    void theAdvisorBeanFromPropertiesAdvisesBootsChatClients() {
        runner(tokens(null), "cycles.ai.order=7", "cycles.ai.action-kind=llm.chat").run(ctx -> {
            CyclesChatAdvisor advisor = ctx.getBean(CyclesChatAdvisor.class);
            assertEquals(7, advisor.getOrder());
            ChatClient chat = ctx.getBean(ChatClient.Builder.class).build();
            assertEquals("The answer is forty two", chat.prompt().user("What is the answer?").call().content());
        });
        assertEquals(List.of("reserve:" + estimate("What is the answer?", 64), "commit:9"), ledger());
        String reserve = null;
        for (Object o : (List<?>) Json.parse(server.requestsJson())) {
            if ("createReservation".equals(((Map<?, ?>) o).get("operation"))) {
                reserve = (String) ((Map<?, ?>) o).get("body");
            }
        }
        assertThat(reserve).contains("\"action\":{\"kind\":\"llm.chat\",\"name\":\"gpt-4o-mini\"");
    }

    @Test
    void itBacksOffAndCanBeTurnedOff() {
        LocalServer s = tokens(null);
        // Off by property; not added to ChatClients by property; the application's own wins.
        runner(s, "cycles.ai.enabled=false").run(ctx -> {
            assertThat(ctx).hasSingleBean(CyclesClient.class).doesNotHaveBean(CyclesChatAdvisor.class)
                    .doesNotHaveBean(ChatClientCustomizer.class);
        });
        runner(s, "cycles.ai.advise-chat-clients=false").run(ctx -> {
            assertThat(ctx).hasSingleBean(CyclesChatAdvisor.class).doesNotHaveBean(ChatClientCustomizer.class);
        });
        CyclesChatAdvisor[] own = new CyclesChatAdvisor[1];
        runner(s).withBean("mine", CyclesChatAdvisor.class, () -> own[0] = CyclesChatAdvisor.builder(
                CyclesClient.builder().baseUrl(s.url()).apiKey(s.apiKey()).tenant("acme").journalEnabled(false).build())
                .order(3).build()).run(ctx -> {
            assertThat(ctx).hasSingleBean(CyclesChatAdvisor.class);
            assertEquals(3, ctx.getBean(CyclesChatAdvisor.class).getOrder());
        });
        // No Spring AI on the class path, or no Cycles client: no advisor.
        runner(s).withClassLoader(new FilteredClassLoader(ChatClient.class)).run(ctx -> {
            assertThat(ctx).hasNotFailed().doesNotHaveBean(CyclesChatAdvisor.class);
        });
        new ApplicationContextRunner().withConfiguration(AutoConfigurations.of(CyclesAiAutoConfiguration.class))
                .run(ctx -> assertThat(ctx).hasNotFailed().doesNotHaveBean(CyclesChatAdvisor.class));
    }

    @Test
    void badPropertiesFailTheStartupNamingThem() {
        LocalServer s = tokens(null);
        for (String[] bad : List.of(new String[] {"cycles.ai.pricing=not json", "cycles.ai.pricing"},
                new String[] {"cycles.ai.default-output-bound=0", "cycles.ai.default-output-bound"},
                new String[] {"cycles.ai.action-kind= ", "cycles.ai.action-kind"})) {
            runner(s, bad[0]).run(ctx -> {
                assertThat(ctx).hasFailed();
                Throwable t = ctx.getStartupFailure();
                while (t != null && !(t instanceof InvalidConfigurationPropertyValueException)) {
                    t = t.getCause();
                }
                assertNotNull(t, bad[0] + ": " + ctx.getStartupFailure());
                assertThat(t.getMessage()).contains(bad[1]);
            });
        }
    }

    @Test
    @SuppressWarnings("unchecked")
    void capsLowerMaxTokensAndRemoveDeniedToolsReportingIt() throws Exception {
        LinkedBlockingQueue<CyclesEvent> events = new LinkedBlockingQueue<>();
        runner(tokens(new Caps(3L, null, null, List.of("shell"), null))).run(ctx -> {
            ctx.getBean(CyclesClient.class).addListener(events::add);
            ChatClient chat = ctx.getBean(ChatClient.Builder.class).build();
            String text = chat.prompt().user("What is the answer?").toolCallbacks(tool("search"), tool("shell"))
                    .options(OpenAiChatOptions.builder().model("gpt-4o-mini").maxTokens(64)
                            .toolChoice(Map.of("type", "function", "function", Map.of("name", "shell"))).build())
                    .call().content();
            assertEquals("The answer is", text);
            CyclesEvent e = null;
            for (long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(5); e == null && System.nanoTime() < end;) {
                CyclesEvent next = events.poll(100, TimeUnit.MILLISECONDS);
                if (next != null && next.kind().equals("caps_applied")) {
                    e = next;
                }
            }
            assertNotNull(e, "no caps_applied event");
            Map<String, Object> j = Json.object(e.json());
            assertEquals("chat_completions", j.get("api"));
            assertEquals(64L, Json.lng(j, "bound_from"));
            assertEquals(3L, Json.lng(j, "bound_to"));
            assertEquals(List.of("shell"), j.get("removed_tools"));
        });
        Map<String, Object> sent = FakeProvider.requests().get(0);
        assertEquals(3L, ((Number) sent.get("output_bound")).longValue());
        Map<String, Object> body = (Map<String, Object>) sent.get("body");
        List<Object> names = new ArrayList<>();
        for (Object t : (List<Object>) body.get("tools")) {
            names.add(((Map<String, Object>) ((Map<String, Object>) t).get("function")).get("name"));
        }
        assertEquals(List.of("search"), names);
        assertFalse(body.containsKey("tool_choice"), body.toString());
        assertThat(ledger()).containsExactly("reserve:" + estimate("What is the answer?", 64), "commit:7");
    }

    @Test
    void aCapOfZeroReleasesAndRefusesTheCallBeforeTheProvider() throws Exception {
        runner(tokens(new Caps(0L, null, null, null, null))).run(ctx -> {
            ChatClient chat = ctx.getBean(ChatClient.Builder.class).build();
            CallNotSentException call = assertThrows(CallNotSentException.class,
                    () -> chat.prompt().user("What is the answer?").call().content());
            assertTrue(call.released());
            assertEquals("BUDGET_EXCEEDED", call.errorName());
            assertFalse(call.plan().send());
            // The SDK's exception (a BudgetExceededException) with core's message, as in every language.
            assertTrue(call instanceof dev.cycles.errors.BudgetExceededException);
            assertEquals(104, call.code());
            assertTrue(call.getMessage().matches("caps lower the output bound to 0, which \\w+ does not accept: the call was not "
                    + "sent, nothing was charged to reservation " + call.reservationId() + ", and the reservation was released"),
                    call.getMessage());
            CallNotSentException stream = assertThrows(CallNotSentException.class,
                    () -> chat.prompt().user("What is the answer?").stream().content().collectList().block());
            assertTrue(stream.released());
        });
        assertEquals(List.of(), FakeProvider.requests());
        long e = estimate("What is the answer?", 64);
        assertEquals(List.of("reserve:" + e, "release:" + e, "reserve:" + e, "release:" + e), ledger());
    }
}
