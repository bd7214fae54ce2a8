package dev.cycles.spring;

import java.lang.reflect.Method;
import org.springframework.aop.support.AopUtils;
import org.springframework.beans.BeansException;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.config.BeanPostProcessor;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.util.ReflectionUtils;

/**
 * Checks every {@code @Cycles} method of a bean when the bean is created (its expressions
 * parsed, their variables checked, unsupported attributes and return types refused), so a bad
 * annotation fails the application's startup instead of its first call.
 */
class CyclesMethodValidator implements BeanPostProcessor {
    private final ObjectProvider<CyclesMethodInterceptor> interceptor;

    CyclesMethodValidator(ObjectProvider<CyclesMethodInterceptor> interceptor) {
        this.interceptor = interceptor;
    }

    @Override
    public Object postProcessAfterInitialization(Object bean, String beanName) throws BeansException {
        Class<?> type = AopUtils.getTargetClass(bean);
        if (type.getName().startsWith("org.springframework.")) {
            return bean;
        }
        ReflectionUtils.doWithMethods(type, m -> check(m, type), m -> !m.isBridge() && !m.isSynthetic()
                && AnnotatedElementUtils.hasAnnotation(m, Cycles.class));
        return bean;
    }

    private void check(Method m, Class<?> type) {
        interceptor.getObject().plan(AopUtils.getMostSpecificMethod(m, type), type);
    }
}
